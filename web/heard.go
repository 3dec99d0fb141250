package web

import (
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
)

// Machines the server cannot hear now show their last known state with
// its age, never stale figures as live: one whose agent has been silent
// for over unheardAfter (three heartbeats), and one that disconnected
// (engine.GoneNodes) while the engine keeps what it last knew of it.

// unheardAfter is how long an agent may be silent before its machine is
// shown as unheard: agents send a heartbeat every second.
const unheardAfter = 3 * time.Second

// heartbeatAges are the remote machines' heartbeat ages now; nil without
// remote agents.
func (s *Server) heartbeatAges(now time.Time) map[string]time.Duration {
	if s.cfg.Agents == nil {
		return nil
	}
	return s.cfg.Agents.HeartbeatAges(now)
}

// heard sets what n says of when its machine was last heard: ages are the
// heartbeat ages (a machine not in them is the server's own, always
// heard).
func heard(n *api.Node, ages map[string]time.Duration, now time.Time) {
	age, ok := ages[n.Name]
	if !ok {
		return
	}
	setHeard(n, now.Add(-age), now)
	n.Unheard = age > unheardAfter
}

func setHeard(n *api.Node, at, now time.Time) {
	s := now.Sub(at).Seconds()
	n.LastHeardAt, n.LastHeardS = &at, &s
}

// goneNode is a disconnected machine as the API shows it: its last known
// state, unheard since it disconnected.
func (s *Server) goneNode(g engine.GoneNode, now time.Time) api.Node {
	n := nodeJSON(g.Status)
	setHeard(&n, g.LostAt, now)
	n.Unheard = true
	return n
}

// heardText is what the cluster page says of a machine last heard age
// ago: "" while it is heard.
func heardText(age time.Duration, gone bool) string {
	switch {
	case gone:
		return fmt.Sprintf("last heard %s ago: disconnected; what follows is as of then", age.Round(time.Second))
	case age > unheardAfter:
		return fmt.Sprintf("last heard %s ago: what follows is as of then", age.Round(time.Second))
	}
	return ""
}
