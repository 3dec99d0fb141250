package web

import (
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/app"
)

// Machines the server cannot hear now show their last known state with
// its age, never stale figures as live: one whose agent has been silent
// for over unheardAfter (three heartbeats), and one that disconnected
// (engine.GoneNodes) while the engine keeps what it last knew of it.

// heartbeatAges are the remote machines' heartbeat ages now; nil without
// remote agents.
func (s *Server) heartbeatAges(now time.Time) map[string]time.Duration {
	if s.cfg.Agents == nil {
		return nil
	}
	return s.cfg.Agents.HeartbeatAges(now)
}

// heardText is what the cluster page says of a machine last heard age
// ago: "" while it is heard.
func heardText(age time.Duration, gone bool) string {
	switch {
	case gone:
		return fmt.Sprintf("last heard %s ago: disconnected; what follows is as of then", age.Round(time.Second))
	case age > app.UnheardAfter:
		return fmt.Sprintf("last heard %s ago: what follows is as of then", age.Round(time.Second))
	}
	return ""
}
