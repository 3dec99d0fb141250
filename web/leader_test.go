package web

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestRoleShows checks what a replica says of its role, and that only the
// leader takes agents.
func TestRoleShows(t *testing.T) {
	store, err := models.Open(context.Background(), modelstest.SQLiteDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	sc, err := sched.New(sched.Config{Policy: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.New(engine.Config{Store: store, Scheduler: sc, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var leading atomic.Bool
	srv, err := New(Config{Store: store, Engine: eng, Telemetry: telemetry.New(time.Minute, 10), Logger: quiet,
		Agents: AgentConfig{Token: "agent-secret"}, Leader: leading.Load})
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
		path       string
		wantCode   int
		wantInBody string
	}{
		{"follower's health names its role", false, "/healthz", http.StatusOK, `"role":"follower"`},
		{"leader's health names its role", true, "/healthz", http.StatusOK, `"role":"leader"`},
		{"follower's gauge is 0", false, "/metrics", http.StatusOK, "\ngpuportal_leader 0\n"},
		{"leader's gauge is 1", true, "/metrics", http.StatusOK, "\ngpuportal_leader 1\n"},
		{"follower refuses agents before any token check", false, wire.Path, http.StatusServiceUnavailable, "follower replica"},
		{"leader hands agents to the hub, which checks the token", true, wire.Path, http.StatusUnauthorized, "agent token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leading.Store(tc.leader)
			code, body := get(tc.path)
			if code != tc.wantCode || !strings.Contains(body, tc.wantInBody) {
				t.Errorf("GET %s: %d %.200q; want %d with %q", tc.path, code, body, tc.wantCode, tc.wantInBody)
			}
		})
	}
}
