package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestStaleStartNotRun: a session that has gone silent for longer than
// the heartbeat timeout (an agent frozen with SIGSTOP while its server
// went on) ends at the next message it reads, without acting on it: a
// start waiting in the connection may be one the server gave to another
// machine since (the fault soak, seed 21: the run started beside its
// replacement). A message read within the timeout starts the run.
func TestStaleStartNotRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		silent time.Duration
		stale  bool
	}{
		{"within the timeout", 0, false},
		{"after a silence longer than the timeout", 3 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, exits := newTestAgent(t, time.Second)
			c, err := NewClient(ClientConfig{Server: "http://s", Token: "t", Nodes: []*Local{a}, Exits: exits})
			if err != nil {
				t.Fatal(err)
			}
			start := wire.Message{Type: wire.TypeStart, ID: 1, Start: &wire.Start{Node: "n0", Job: wire.JobSpec{
				JobID: 7, Run: 1, Command: []string{"sleep", "30"}, GPUs: []int{0}}}}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
				if err != nil {
					return
				}
				defer conn.Close()
				_ = conn.WriteJSON(&start)
				var ack wire.Message
				_ = conn.ReadJSON(&ack) // the agent's answer, if it acts on the start
			}))
			defer srv.Close()
			conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			const timeout = 2 * time.Second
			c.timeout.Store(int64(timeout))
			c.hear()
			if tc.silent > 0 {
				c.heard.Store(time.Now().Add(-tc.silent).UnixNano()) // heard last before the freeze
			}
			s := &session{c: c, conn: conn, timeout: timeout, welcomed: true, inflight: map[uint64]jobKey{}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = s.read(ctx)
			ran := len(a.Running()) > 0
			t.Cleanup(func() { _ = a.Stop(context.Background(), job.RunRef{Job: 7, Run: 1}) })
			if tc.stale {
				if !errors.Is(err, errStale) || ran {
					t.Errorf("read = %v, run started %v; want errStale and no run", err, ran)
				}
				return
			}
			if errors.Is(err, errStale) || !ran {
				t.Errorf("read = %v, run started %v; want the run started", err, ran)
			}
		})
	}
}
