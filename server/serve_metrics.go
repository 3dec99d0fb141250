package server

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// minMetricsToken is the shortest token /metrics takes.
const minMetricsToken = 16

// metricsFlags say who may read /metrics and what it names
// (docs/operations.md, "Metrics and health"): with a token, only
// Prometheus with it, and users and jobs are named per GPU; without
// one, anyone who reaches the server, and no user or job is named unless
// --metrics-user-labels says so.
type metricsFlags struct {
	tokenFile  string
	userLabels bool
	// token is read from tokenFile by load.
	token string
}

func (m *metricsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.tokenFile, "metrics-token-file", "", "file holding the bearer token that /metrics then requires (its first line, at least 16 characters); /metrics then names the users and jobs on each GPU. Empty: /metrics is anonymous and names none")
	fs.BoolVar(&m.userLabels, "metrics-user-labels", false, "name users and jobs on each GPU in /metrics even without --metrics-token-file (protect /metrics otherwise, at the proxy)")
}

// load reads the token, never taken from the command line, where other
// users of the machine could read it.
func (m *metricsFlags) load() error {
	if m.tokenFile == "" {
		return nil
	}
	b, err := os.ReadFile(m.tokenFile)
	if err != nil {
		return fmt.Errorf("serve: --metrics-token-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	m.token = strings.TrimSpace(line)
	if len(m.token) < minMetricsToken {
		return fmt.Errorf("serve: --metrics-token-file %s: the token on its first line has %d characters; want at least %d (openssl rand -hex 32 makes one)",
			m.tokenFile, len(m.token), minMetricsToken)
	}
	return nil
}
