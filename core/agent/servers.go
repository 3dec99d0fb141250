package agent

import (
	"errors"
	"strings"
)

// agentURLs turns a comma-separated list of server base URLs (the
// replicas of one server) into their agent endpoints, in order.
func agentURLs(servers string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		u, err := agentURL(s)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, errors.New("agent client: no server URL")
	}
	return out, nil
}
