package web

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuportal/gpuportal/api"
)

// Several replicas may serve one PostgreSQL database. All of them serve
// pages and the API; only the leader schedules and runs machines, so only
// it takes agents (docs/operations.md), fenced or not: an agent that
// reconnects while the database is out keeps its runs with it.

// leading reports whether this replica schedules.
func (s *Server) leading() bool { return s.cfg.Leader == nil || s.cfg.Leader() }

// role names this replica's role for /healthz.
func (s *Server) role() string {
	if s.leading() {
		return "leader"
	}
	return "follower"
}

// agents is the handler of the agents' endpoint: Config.Agents, or one
// that says remote agents are off.
func (s *Server) agents() http.Handler {
	if s.cfg.Agents != nil {
		return s.cfg.Agents
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSONError(w, http.StatusNotFound, "remote agents are off: start the server with --agent-token")
	})
}

// agentsOnLeader refuses agents on a follower, with 503 and a message, so
// that an agent given several servers tries the next. A leader that is
// fenced (it cannot confirm its lock while the database is out) takes
// them: it keeps its machines and their runs through the outage, and one
// whose agent reconnects meanwhile is no exception.
func (s *Server) agentsOnLeader(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.leading() && !s.fenced() {
			w.Header().Set("Retry-After", "1")
			writeJSONError(w, http.StatusServiceUnavailable,
				"this server is a follower replica: agents connect to the leader (give the agent every server: --server URL1,URL2)")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// fenced reports whether this replica is a leader that cannot confirm
// its lock now (the database is out): it keeps its machines and their
// runs but neither schedules nor records until it takes the lock back, or
// steps down to a follower after --db-outage-hold.
func (s *Server) fenced() bool {
	return s.app != nil && s.app.Fenced()
}

// leaderGauges are gpuportal_leader, 1 on the replica that leads, fenced
// or not, and gpuportal_leader_fenced, 1 while that leader is fenced. A
// fenced leader is still the leader: no other replica can take the lock
// while the database is out, and when it is back either this one takes
// it back or it steps down. Saying 0 would tell the alert rules that no
// replica leads when the one that does is riding out an outage.
func leaderGauges(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpuportal_leader",
			Help: "1 when this replica is the leader (holds the leader lock, or is fenced while it cannot confirm it: gpuportal_leader_fenced), 0 when it is a follower.",
		}, func() float64 {
			if s.leading() || s.fenced() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpuportal_leader_fenced",
			Help: "1 while this replica, the leader, cannot confirm its lock (the database is out): it keeps its machines and their runs, but neither schedules nor records until it takes the lock back or steps down.",
		}, func() float64 {
			if s.fenced() {
				return 1
			}
			return 0
		}),
	}
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(api.Error{Error: msg})
}
