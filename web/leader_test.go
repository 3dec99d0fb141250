package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	agenthub "github.com/gpuportal/gpuportal/core/agent/hub"
	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/enginestore"
	"github.com/gpuportal/gpuportal/models"
)

// TestRoleShows checks what a replica says of its role, and that only the
// leader (fenced or not) takes agents.
func TestRoleShows(t *testing.T) {
	t.Parallel()
	store, err := models.Open(context.Background(), migrated.SQLiteDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	sc, err := sched.New(sched.Config{Policy: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.New(engine.Config{Store: enginestore.New(store), Scheduler: sc, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var leading atomic.Bool
	srv, err := New(Config{App: app.New(app.Config{Store: store, Engine: eng, Logger: quiet, Leader: leading.Load}),
		Telemetry: telemetry.New(time.Minute, 10), Logger: quiet,
		Agents: agenthub.New(agenthub.Config{Token: "agent-secret"}, eng, quiet), Leader: leading.Load})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer wrong-token")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	tests := []struct {
		name       string
		leader     bool
		fenced     bool // a leader that cannot confirm its lock
		path       string
		wantCode   int
		wantInBody string
	}{
		{"follower's health names its role", false, false, "/healthz", http.StatusOK, `"role":"follower"`},
		{"leader's health names its role", true, false, "/healthz", http.StatusOK, `"role":"leader"`},
		{"follower's gauge is 0", false, false, "/metrics", http.StatusOK, "\ngpuportal_leader 0\n"},
		{"leader's gauge is 1", true, false, "/metrics", http.StatusOK, "\ngpuportal_leader 1\n"},
		{"leader is not fenced", true, false, "/metrics", http.StatusOK, "\ngpuportal_leader_fenced 0\n"},
		// Its lock lost with the database, the leader is fenced: it no
		// longer holds the lock, but is still the one that leads.
		{"fenced leader is still the leader", false, true, "/metrics", http.StatusOK, "\ngpuportal_leader 1\n"},
		{"fenced leader says it is fenced", false, true, "/metrics", http.StatusOK, "\ngpuportal_leader_fenced 1\n"},
		{"follower is not fenced", false, false, "/metrics", http.StatusOK, "\ngpuportal_leader_fenced 0\n"},
		{"follower refuses agents before any token check", false, false, wire.Path, http.StatusServiceUnavailable, "follower replica"},
		{"leader hands agents to the hub, which checks the token", true, false, wire.Path, http.StatusUnauthorized, "agent token"},
		// An agent that reconnects during the outage keeps its runs.
		{"fenced leader hands agents to the hub", false, true, wire.Path, http.StatusUnauthorized, "agent token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leading.Store(tc.leader)
			if tc.fenced {
				eng.Fence("the database is out")
			} else {
				eng.Unfence()
			}
			code, body := get(tc.path)
			if code != tc.wantCode || !strings.Contains(body, tc.wantInBody) {
				t.Errorf("GET %s: %d %.200q; want %d with %q", tc.path, code, body, tc.wantCode, tc.wantInBody)
			}
		})
	}
}

// TestFollowerNodeActions checks an admin's drain, resume, cordon,
// uncordon and GPU clear on a follower replica: they answer as on the
// leader (no 503), write the store for the leader's next pass, and are
// audited.
func TestFollowerNodeActions(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	fol := followerOf(t, ts, sched.Config{Policy: "fifo"})
	if err := enginestore.New(ts.store).RecordGPUFault(ctx, engine.GPUFault{Ref: gpu.Ref{Node: "box", Index: 1}, Reason: "GPU box/1 reported XID 79", At: time.Now()}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, role, method, target string
		wantCode                   int
		wantState, wantNote        string // of the API's answer
		wantCordoned, wantDraining bool   // in the store after
		wantAudit                  string // the newest audit entry's action
	}{
		{"a researcher may not cordon", "alice", http.MethodPost, "/api/v1/nodes/box/cordon", http.StatusForbidden, "", "", false, false, ""},
		{"cordon", "admin", http.MethodPost, "/api/v1/nodes/box/cordon", http.StatusOK, "cordoned", "cordoned; takes effect on the leader's next pass", true, false, "node.cordon"},
		{"drain", "admin", http.MethodPost, "/api/v1/nodes/box/drain", http.StatusOK, "draining", "draining; takes effect", true, true, "node.drain"},
		{"resume ends the drain and the cordon", "admin", http.MethodPost, "/api/v1/nodes/box/resume", http.StatusOK, "ready", "resumed", false, false, "node.resume"},
		{"cordon from the page", "admin", http.MethodPost, "/cluster/nodes/box/cordon", http.StatusSeeOther, "", "", true, false, "node.cordon"},
		{"uncordon", "admin", http.MethodPost, "/api/v1/nodes/box/uncordon", http.StatusOK, "ready", "uncordoned", false, false, "node.uncordon"},
		{"clear a GPU in service", "admin", http.MethodPost, "/api/v1/nodes/box/gpus/0/clear", http.StatusNotFound, "", "", false, false, "node.uncordon"},
		{"clear a GPU out of service", "admin", http.MethodPost, "/api/v1/nodes/box/gpus/1/clear", http.StatusOK, "ready", "GPU 1 cleared", false, false, "gpu.clear"},
		{"clear it again", "admin", http.MethodPost, "/api/v1/nodes/box/gpus/1/clear", http.StatusNotFound, "", "", false, false, "gpu.clear"},
		{"bad GPU index", "admin", http.MethodPost, "/api/v1/nodes/box/gpus/x/clear", http.StatusBadRequest, "", "", false, false, "gpu.clear"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := fol.do(t, tc.role, tc.method, tc.target, "")
			if rec.Code != tc.wantCode {
				t.Fatalf("%s %s: %d %.200q, want %d", tc.method, tc.target, rec.Code, rec.Body.String(), tc.wantCode)
			}
			if tc.wantState != "" {
				var n api.Node
				if err := json.Unmarshal(rec.Body.Bytes(), &n); err != nil {
					t.Fatal(err)
				}
				if n.Name != "box" || n.State != tc.wantState || !strings.Contains(n.Note, tc.wantNote) {
					t.Errorf("answer %+v, want box %s with a note %q", n, tc.wantState, tc.wantNote)
				}
			}
			st, err := enginestore.New(ts.store).NodeStates(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Cordoned["box"] != tc.wantCordoned || st.Draining["box"] != tc.wantDraining {
				t.Errorf("store: cordoned %v draining %v, want %v %v", st.Cordoned["box"], st.Draining["box"], tc.wantCordoned, tc.wantDraining)
			}
			if tc.wantAudit == "" {
				return
			}
			log, err := ts.store.AuditLog(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(log) != 1 || log[0].Action != tc.wantAudit || log[0].Actor != "admin" {
				t.Errorf("newest audit entry %+v, want admin's %s", log, tc.wantAudit)
			}
		})
	}
	if st, _ := enginestore.New(ts.store).NodeStates(ctx); len(st.Faults) != 0 {
		t.Errorf("faults left in the store: %+v", st.Faults)
	}
	if log, err := ts.store.AuditLog(ctx, 1); err != nil || len(log) != 1 || log[0].Detail != "GPU box/1 reported XID 79" {
		t.Errorf("the clear's audit entry %+v (%v) lacks the fault it cleared", log, err)
	}
}

// followerOf is a follower replica beside ts: its own engine (a
// follower's, scheduling with cfg) and web server over ts's store, ts's
// users and sessions.
func followerOf(t testing.TB, ts *testServer, cfg sched.Config) *testServer {
	t.Helper()
	sc, err := sched.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.New(engine.Config{Store: enginestore.New(ts.store), Scheduler: sc, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	eng.SetFollower()
	follower := func() bool { return false }
	srv, err := New(Config{App: app.New(app.Config{Store: ts.store, Engine: eng, Logger: quiet, Leader: follower}),
		Telemetry: telemetry.New(time.Minute, 10), Logger: quiet, Leader: follower})
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{Server: srv, store: ts.store, engine: eng, sessions: ts.sessions, tokens: ts.tokens}
}
