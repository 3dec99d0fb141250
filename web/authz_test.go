package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/enginestore"
	"github.com/gpuportal/gpuportal/history"
	"github.com/gpuportal/gpuportal/live"
	"github.com/gpuportal/gpuportal/models"
)

// testServer is a Server on a fresh SQLite store with the demo's teams
// and users, an engine running with no machines, and credentials per role.
type testServer struct {
	*Server
	store  *models.Store
	engine *engine.Engine
	// history writes the GPU history of the server's telemetry when a
	// test runs it.
	history  *history.Writer
	sessions map[string]string // user -> session cookie
	tokens   map[string]string // user -> API token
}

var roles = []string{"anonymous", "alice", "bob", "lead", "admin"}

// testConfig is what a test server is made of, as serve makes it: the
// web server's settings, the store and the engine, and the application
// layer's settings (Idle, ReclaimGrace, AllowedImages), which the helper
// completes with the store, the engine, the telemetry, the clock and the
// leader of the others.
type testConfig struct {
	Config
	Store  *models.Store
	Engine *engine.Engine
	App    app.Config
}

func newTestServer(t testing.TB, opts ...func(*testConfig)) *testServer {
	t.Helper()
	return newTestServerOn(t, migrated.SQLiteDSN(t), opts...)
}

// newTestServerOn is newTestServer on the database dsn.
func newTestServerOn(t testing.TB, dsn string, opts ...func(*testConfig)) *testServer {
	t.Helper()
	ctx := context.Background()
	// bcrypt's least cost: each test server hashes four passwords, which
	// take seconds each at the default cost under the race detector.
	store, err := models.OpenWith(ctx, dsn, models.Options{PasswordCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, team := range []string{"vision", "nlp"} {
		if _, err := store.CreateTeam(ctx, team, 2); err != nil {
			t.Fatal(err)
		}
	}
	ts := &testServer{store: store, sessions: map[string]string{}, tokens: map[string]string{}}
	now := time.Now()
	for _, u := range []struct {
		name string
		role models.Role
		team string
	}{{"alice", models.RoleResearcher, "vision"}, {"bob", models.RoleResearcher, "nlp"}, {"lead", models.RoleLead, "vision"}, {"admin", models.RoleAdmin, ""}} {
		user, err := store.CreateUser(ctx, u.name, "password1", u.role, u.team)
		if err != nil {
			t.Fatal(err)
		}
		if ts.sessions[u.name], err = store.CreateSession(ctx, user.ID, now, time.Hour); err != nil {
			t.Fatal(err)
		}
		if ts.tokens[u.name], err = store.CreateAPIToken(ctx, user.ID, "test", now, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := sched.New(sched.Config{Policy: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.New(engine.Config{Store: enginestore.New(store), Scheduler: sc, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = eng.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	tc := testConfig{Config: Config{Telemetry: telemetry.New(time.Minute, 10), Logger: quiet,
		SocketRecheck: 100 * time.Millisecond}, Store: store, Engine: eng}
	for _, o := range opts {
		o(&tc)
	}
	cfg := tc.Config
	ts.engine = tc.Engine
	changed := make(chan struct{}, 1)
	ac := tc.App
	ac.Store, ac.Engine, ac.Telemetry, ac.Logger = tc.Store, tc.Engine, cfg.Telemetry, quiet
	ac.Now, ac.Leader, ac.AccessChanged = cfg.Now, cfg.Leader, app.Signal(changed)
	cfg.App, cfg.AccessChanged = app.New(ac), changed
	if cfg.Live == nil {
		// The live stream's frames, as serve makes them.
		pub := live.New(live.Config{Telemetry: cfg.Telemetry, Logger: quiet})
		cfg.Live = pub
		cfg.Collectors = append(cfg.Collectors, pub.Collectors()...)
		published := make(chan struct{})
		go func() { pub.Run(runCtx); close(published) }()
		t.Cleanup(func() { stop(); <-published })
	}
	ts.history = history.New(history.Config{Store: store, Telemetry: cfg.Telemetry, Nodes: eng, Logger: quiet, Leader: cfg.Leader})
	cfg.Collectors = append(cfg.Collectors, ts.history.Collectors()...)
	ts.Server, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// newJob stores a queued job of alice's and returns its ID.
// newSession stores a Jupyter session of alice's, waiting, and returns
// its URL prefix.
func (ts *testServer) newSession(t testing.TB) string {
	t.Helper()
	j := &models.Job{Name: "nb", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(),
		SessionType: "jupyter", SessionSecret: fmt.Sprint("k1.salt", uniq.Add(1))}
	if err := ts.store.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return ts.store.SessionPrefix(j)
}

func (ts *testServer) newJob(t testing.TB) int64 {
	t.Helper()
	j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Now()}
	if err := ts.store.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// newArray stores a queued array of three tasks of alice's and returns
// its ID.
func (ts *testServer) newArray(t testing.TB) int64 {
	t.Helper()
	var tasks []*models.Job
	for i := range 3 {
		tasks = append(tasks, &models.Job{Name: fmt.Sprintf("a[%d]", i), Team: "vision", User: "alice", GPUs: 1, SimDuration: 60,
			SubmittedAt: time.Now(), ArrayIndex: i, ArrayLimit: 2})
	}
	if err := ts.store.CreateArray(context.Background(), tasks); err != nil {
		t.Fatal(err)
	}
	return tasks[0].ArrayID
}

// do sends a request as role: with a session cookie (and CSRF token) for
// pages, a bearer token for the API.
func (ts *testServer) do(t *testing.T, role, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	return ts.doAs(t, role, ts.sessions[role], method, target, body)
}

// freshSession logs role in anew, for requests that end their session.
func (ts *testServer) freshSession(t *testing.T, role string) string {
	t.Helper()
	u, err := ts.store.UserByName(context.Background(), role)
	if err != nil {
		return ""
	}
	s, err := ts.store.CreateSession(context.Background(), u.ID, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// freshToken is a new API token of role's user.
func (ts *testServer) freshToken(t *testing.T, role string) string {
	t.Helper()
	u, err := ts.store.UserByName(context.Background(), role)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.store.CreateAPIToken(context.Background(), u.ID, "fresh", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (ts *testServer) doAs(t testing.TB, role, session, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	if strings.HasPrefix(target, "/api/") {
		req.Header.Set("Content-Type", "application/json")
		if tok := ts.tokens[role]; tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	} else {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if session != "" {
			req.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
			req.Header.Set(csrfHeader, sessionCSRF(session))
		} else {
			req.AddCookie(&http.Cookie{Name: csrfCookie, Value: preSessionCSRF})
			req.Header.Set(csrfHeader, preSessionCSRF)
		}
	}
	rec := httptest.NewRecorder()
	ts.Handler().ServeHTTP(rec, req)
	return rec
}

// preSessionCSRF is the double-submit token of requests without a session.
var preSessionCSRF = strings.Repeat("ab", 32)

// access is the status each role gets, in the order of roles.
type access [5]int

var (
	public  = access{200, 200, 200, 200, 200}
	pageAny = access{303, 200, 200, 200, 200}
	apiAll  = access{401, 200, 200, 200, 200}
	team    = access{303, 200, 403, 200, 200} // vision's page: its members and admins
	apiTeam = access{401, 200, 403, 200, 200}
	// alice's job (or array): her team and admins; to others it does not
	// exist (noSuch), so that IDs of other teams cannot be probed.
	teamJob    = access{303, 200, 404, 200, 200}
	apiTeamJob = access{401, 200, 404, 200, 200}
)

var uniq atomic.Int64

// TestEveryRouteHasARule walks every route the server registers, as every
// role and as nobody, and checks the status. A route missing from the
// table fails the test: a new route needs a rule here.
func TestEveryRouteHasARule(t *testing.T) {
	ts := newTestServer(t)
	job := func(t *testing.T) string { return fmt.Sprint(ts.newJob(t)) }
	form := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	rules := []struct {
		route  string // method and path as registered
		target func(t *testing.T) string
		body   func() string
		want   access
	}{
		{"GET /healthz", nil, nil, public},
		{"GET /readyz", nil, nil, public},
		{"GET /metrics", nil, nil, public},
		{"GET /static/*", func(*testing.T) string { return "/static/portal.css" }, nil, public},
		{"GET /favicon.ico", nil, nil, public},
		{"GET /login", nil, nil, access{200, 303, 303, 303, 303}},
		{"POST /login", nil, func() string { return form("username", "nobody", "password", "x") }, access{401, 401, 401, 401, 401}},
		{"POST /logout", nil, nil, access{303, 303, 303, 303, 303}},
		// Without a provider configured, its sign-in does not exist.
		{"GET /login/oidc", nil, nil, access{404, 404, 404, 404, 404}},
		{"GET /login/oidc/callback", nil, nil, access{404, 404, 404, 404, 404}},
		{"GET /", nil, nil, access{303, 303, 303, 303, 303}},
		{"GET /jobs", nil, nil, pageAny},
		{"GET /jobs/rows", nil, nil, pageAny},
		{"GET /jobs/new", nil, nil, pageAny},
		{"GET /sessions", nil, nil, pageAny},
		{"POST /jobs", nil, func() string {
			return form("name", "x", "team", "vision", "gpus", "1", "kind", "sim", "duration_s", "5")
		}, access{303, 303, 400, 303, 303}},
		{"GET /jobs/:id", func(t *testing.T) string { return "/jobs/" + job(t) }, nil, teamJob},
		{"GET /jobs/:id/live", func(t *testing.T) string { return "/jobs/" + job(t) + "/live" }, nil, teamJob},
		{"POST /jobs/:id/keep-alive", func(t *testing.T) string { return "/jobs/" + job(t) + "/keep-alive" }, func() string { return form("hours", "1") }, access{303, 409, 404, 409, 409}},
		{"POST /jobs/:id/cancel", func(t *testing.T) string { return "/jobs/" + job(t) + "/cancel" }, nil, access{303, 303, 404, 303, 303}},
		{"POST /jobs/:id/resubmit", func(t *testing.T) string { return "/jobs/" + job(t) + "/resubmit" }, nil, access{303, 303, 404, 303, 303}},
		{"GET /arrays/:id", func(t *testing.T) string { return fmt.Sprint("/arrays/", ts.newArray(t)) }, nil, teamJob},
		{"GET /arrays/:id/live", func(t *testing.T) string { return fmt.Sprint("/arrays/", ts.newArray(t), "/live") }, nil, teamJob},
		{"POST /arrays/:id/cancel", func(t *testing.T) string { return fmt.Sprint("/arrays/", ts.newArray(t), "/cancel") }, nil, access{303, 303, 404, 303, 303}},
		{"GET /cluster", nil, nil, pageAny},
		{"GET /cluster/live", nil, nil, pageAny},
		{"GET /cluster/history", func(*testing.T) string { return "/cluster/history?range=24h" }, nil, pageAny},
		{"GET /cluster/gpus/history", func(*testing.T) string { return "/cluster/gpus/history?range=1h" }, nil, pageAny},
		{"GET /cluster/gpus/:uuid/history", func(*testing.T) string { return "/cluster/gpus/GPU-none/history?range=7d" }, nil, access{303, 404, 404, 404, 404}},
		{"GET /jobs/:id/memory", func(t *testing.T) string { return "/jobs/" + job(t) + "/memory?range=24h" }, nil, teamJob},
		{"GET /jobs/:id/usage", func(t *testing.T) string { return "/jobs/" + job(t) + "/usage" }, nil, teamJob},
		{"GET /ws", nil, nil, access{401, 400, 400, 400, 400}}, // 400: allowed, but not a websocket handshake
		{"GET /queues", nil, nil, pageAny},
		{"GET /accounting", func(*testing.T) string { return "/accounting?by=team" }, nil, access{303, 403, 403, 200, 200}},
		{"GET /teams", nil, nil, pageAny},
		{"GET /teams/:name", func(*testing.T) string { return "/teams/vision" }, nil, team},
		{"GET /teams/:name/flags", func(*testing.T) string { return "/teams/vision/flags" }, nil, team},
		{"POST /teams/:name/share", func(*testing.T) string { return "/teams/vision/share" }, func() string { return form("weight", "1.5") }, access{303, 403, 403, 403, 200}},
		{"POST /teams/:name/time-limits", func(*testing.T) string { return "/teams/vision/time-limits" }, func() string { return form("default_time_limit", "1h", "max_time_limit", "") }, access{303, 403, 403, 200, 200}},
		{"POST /teams/:name/batch-policy", func(*testing.T) string { return "/teams/vision/batch-policy" }, func() string { return form("priorities", "normal", "priorities", "low", "high_gpus", "0") }, access{303, 403, 403, 403, 200}},
		{"POST /teams/:name/session-policy", func(*testing.T) string { return "/teams/vision/session-policy" }, func() string { return form("max_session_hours", "4", "priority_gpus", "1") }, access{303, 403, 403, 200, 200}},
		{"POST /teams/:name/idle-policy", func(*testing.T) string { return "/teams/vision/idle-policy" }, func() string { return form("reclaim_sessions", "on", "max_keep_alive_hours", "4") }, access{303, 403, 403, 200, 200}},
		{"POST /teams/:name/caps", func(*testing.T) string { return "/teams/vision/caps" }, func() string { return form("user", "alice", "max_gpus", "2") }, access{303, 403, 403, 200, 200}},
		{"POST /jobs/:id/template", func(t *testing.T) string { return "/jobs/" + job(t) + "/template" }, func() string {
			return form("template_name", fmt.Sprint("t", uniq.Add(1)))
		}, access{303, 303, 404, 303, 303}},
		{"POST /templates/:id/delete", func(*testing.T) string { return "/templates/999999/delete" }, nil, access{303, 404, 404, 404, 404}},
		{"GET /jobs/:id/logs", func(t *testing.T) string { return "/jobs/" + job(t) + "/logs" }, nil, access{303, 404, 404, 404, 404}},
		{"POST /cluster/nodes/:name/drain", func(*testing.T) string { return "/cluster/nodes/none/drain" }, nil, access{303, 403, 403, 403, 404}},
		{"POST /cluster/nodes/:name/resume", func(*testing.T) string { return "/cluster/nodes/none/resume" }, nil, access{303, 403, 403, 403, 404}},
		{"POST /cluster/nodes/:name/cordon", func(*testing.T) string { return "/cluster/nodes/none/cordon" }, nil, access{303, 403, 403, 403, 404}},
		{"POST /cluster/nodes/:name/uncordon", func(*testing.T) string { return "/cluster/nodes/none/uncordon" }, nil, access{303, 403, 403, 403, 404}},
		{"POST /cluster/nodes/:name/gpus/:index/clear", func(*testing.T) string { return "/cluster/nodes/none/gpus/0/clear" }, nil, access{303, 403, 403, 403, 404}},
		{"GET /queues/live", nil, nil, pageAny},
		{"GET /tokens", nil, nil, pageAny},
		{"POST /tokens", nil, func() string { return form("name", "t", "days", "3") }, pageAny},
		// Each user's own notifications: the form's rule sets an address,
		// so that the test has somewhere to go.
		{"GET /notifications", nil, nil, pageAny},
		{"GET /notifications/deliveries", nil, nil, pageAny},
		{"POST /notifications", nil, func() string { return form("email", "me@example.org", "events", "failed") }, pageAny},
		{"POST /notifications/test", nil, nil, pageAny},
		{"GET /api/v1/me/notifications", nil, nil, apiAll},
		{"PUT /api/v1/me/notifications", nil, func() string { return `{"events":["failed","timed_out"]}` }, apiAll},
		{"POST /api/v1/me/notifications/test", nil, nil, access{401, 202, 202, 202, 202}},
		{"POST /tokens/:id/revoke", func(*testing.T) string { return "/tokens/999999/revoke" }, nil, access{303, 404, 404, 404, 404}},
		{"GET /admin", nil, nil, access{303, 403, 403, 403, 200}},
		{"POST /admin/:action", func(*testing.T) string { return "/admin/create-team" }, func() string {
			return form("name", fmt.Sprint("team", uniq.Add(1)), "guarantee", "1")
		}, access{303, 403, 403, 403, 200}},
		{"GET /admin/machines", nil, nil, access{303, 403, 403, 403, 200}},
		{"POST /admin/machines/join-tokens", nil, func() string { return form("name", fmt.Sprint("rack ", uniq.Add(1)), "ttl_s", "3600") }, access{303, 403, 403, 403, 200}},
		{"POST /admin/machines/join-tokens/:id/revoke", func(*testing.T) string { return "/admin/machines/join-tokens/999999/revoke" }, nil, access{303, 403, 403, 403, 404}},
		{"POST /admin/machines/:name/remove", func(*testing.T) string { return "/admin/machines/none/remove" }, nil, access{303, 403, 403, 403, 404}},
		// No job has finished on the test server: nothing to replay (422).
		{"GET /admin/whatif", nil, nil, access{303, 403, 403, 403, 200}},
		{"POST /admin/whatif", nil, func() string { return form("days", "7", "policy", "fifo") }, access{303, 403, 403, 403, 422}},
		{"GET /api/v1/whatif", nil, nil, access{401, 403, 403, 403, 422}},
		{"POST /api/v1/tokens", nil, nil, access{401, 401, 401, 401, 401}}, // needs basic auth
		// Agents present the agent token, never a user's; this server has none.
		{"GET /api/v1/agents/connect", nil, nil, access{404, 404, 404, 404, 404}},
		{"GET /api/v1/agents/tunnel", nil, nil, access{404, 404, 404, 404, 404}},
		{"GET /api/v1/agents/checkpoint", nil, nil, access{404, 404, 404, 404, 404}},
		// A session: its owner and admins reach it (503: it waits for
		// its GPUs), nobody else; the visitor is sent to log in.
		{"GET /sessions/:id/:secret", func(t *testing.T) string { return strings.TrimSuffix(ts.newSession(t), "/") }, nil, access{303, 303, 303, 303, 303}},
		{"GET /sessions/:id/:secret/*", func(t *testing.T) string { return ts.newSession(t) + "tree" }, nil, access{303, 503, 403, 403, 503}},
		{"HEAD /sessions/:id/:secret/*", func(t *testing.T) string { return ts.newSession(t) + "tree" }, nil, access{401, 503, 403, 403, 503}},
		{"OPTIONS /sessions/:id/:secret/*", func(t *testing.T) string { return ts.newSession(t) + "api" }, nil, access{401, 503, 403, 403, 503}},
		{"POST /sessions/:id/:secret/*", func(t *testing.T) string { return ts.newSession(t) + "api/kernels" }, nil, access{401, 503, 403, 403, 503}},
		{"PUT /sessions/:id/:secret/*", func(t *testing.T) string { return ts.newSession(t) + "api/contents/x" }, nil, access{401, 503, 403, 403, 503}},
		{"PATCH /sessions/:id/:secret/*", func(t *testing.T) string { return ts.newSession(t) + "api/contents/x" }, nil, access{401, 503, 403, 403, 503}},
		{"DELETE /sessions/:id/:secret/*", func(t *testing.T) string { return ts.newSession(t) + "api/contents/x" }, nil, access{401, 503, 403, 403, 503}},
		{"GET /api/v1/me", nil, nil, apiAll},
		{"GET /api/v1/templates", nil, nil, apiAll},
		{"POST /api/v1/templates", nil, func() string {
			return fmt.Sprintf(`{"name":"t%d","job":{"name":"x","team":"vision","gpus":1,"sim":{"duration_s":5}}}`, uniq.Add(1))
		}, access{401, 201, 400, 201, 201}},
		{"DELETE /api/v1/templates/:id", func(*testing.T) string { return "/api/v1/templates/999999" }, nil, access{401, 404, 404, 404, 404}},
		{"GET /api/v1/openapi.json", nil, nil, public},
		{"GET /api/v1/version", nil, nil, public},
		{"DELETE /api/v1/tokens/current", nil, nil, access{401, 204, 204, 204, 204}}, // with a fresh token: it ends it
		{"GET /api/v1/gpus", nil, nil, apiAll},
		{"GET /api/v1/gpus/history", func(*testing.T) string { return "/api/v1/gpus/history?range=24h" }, nil, apiAll},
		{"GET /api/v1/gpus/:uuid/history", func(*testing.T) string { return "/api/v1/gpus/GPU-none/history?range=1h" }, nil, access{401, 404, 404, 404, 404}},
		{"GET /api/v1/cluster/history", func(*testing.T) string { return "/api/v1/cluster/history?range=7d" }, nil, apiAll},
		{"GET /api/v1/queues", nil, nil, apiAll},
		{"GET /api/v1/nodes", nil, nil, apiAll},
		{"GET /api/v1/teams", nil, nil, apiAll},
		{"GET /api/v1/teams/:name", func(*testing.T) string { return "/api/v1/teams/vision" }, nil, apiTeam},
		{"PATCH /api/v1/teams/:name", func(*testing.T) string { return "/api/v1/teams/vision" }, func() string { return `{"weight":2}` }, access{401, 403, 403, 403, 200}},
		{"PUT /api/v1/teams/:name/batch-policy", func(*testing.T) string { return "/api/v1/teams/vision/batch-policy" }, func() string { return `{"priorities":["normal","low"],"high_gpus":0}` }, access{401, 403, 403, 403, 200}},
		{"PUT /api/v1/teams/:name/session-policy", func(*testing.T) string { return "/api/v1/teams/vision/session-policy" }, func() string { return `{"max_session_hours":4,"priority_gpus":1}` }, access{401, 403, 403, 200, 200}},
		{"PUT /api/v1/teams/:name/idle-policy", func(*testing.T) string { return "/api/v1/teams/vision/idle-policy" }, func() string { return `{"reclaim_sessions":true}` }, access{401, 403, 403, 200, 200}},
		{"PUT /api/v1/teams/:name/time-limits", func(*testing.T) string { return "/api/v1/teams/vision/time-limits" }, func() string { return `{"default_time_limit":"","max_time_limit":""}` }, access{401, 403, 403, 200, 200}},
		{"PUT /api/v1/teams/:name/caps/:user", func(*testing.T) string { return "/api/v1/teams/vision/caps/alice" }, func() string { return `{"max_gpus":4}` }, access{401, 403, 403, 200, 200}},
		{"POST /api/v1/nodes/:name/drain", func(*testing.T) string { return "/api/v1/nodes/none/drain" }, nil, access{401, 403, 403, 403, 404}},
		{"POST /api/v1/nodes/:name/resume", func(*testing.T) string { return "/api/v1/nodes/none/resume" }, nil, access{401, 403, 403, 403, 404}},
		{"POST /api/v1/nodes/:name/cordon", func(*testing.T) string { return "/api/v1/nodes/none/cordon" }, nil, access{401, 403, 403, 403, 404}},
		{"GET /api/v1/join-tokens", nil, nil, access{401, 403, 403, 403, 200}},
		{"POST /api/v1/join-tokens", nil, func() string { return `{"name":"rack"}` }, access{401, 403, 403, 403, 201}},
		{"DELETE /api/v1/join-tokens/:id", func(*testing.T) string { return "/api/v1/join-tokens/999" }, nil, access{401, 403, 403, 403, 404}},
		{"GET /api/v1/machines", nil, nil, access{401, 403, 403, 403, 200}},
		{"GET /api/v1/users", nil, nil, access{401, 403, 403, 403, 200}},
		{"GET /api/v1/users/:name/tokens", func(*testing.T) string { return "/api/v1/users/alice/tokens" }, nil, access{401, 403, 403, 403, 200}},
		{"DELETE /api/v1/users/:name/tokens/:id", func(*testing.T) string { return "/api/v1/users/alice/tokens/999999" }, nil, access{401, 403, 403, 403, 404}},
		// On a user that does not exist: the rules of the others need theirs.
		{"POST /api/v1/users/:name/disable", func(*testing.T) string { return "/api/v1/users/nosuch/disable" }, nil, access{401, 403, 403, 403, 404}},
		{"POST /api/v1/users/:name/enable", func(*testing.T) string { return "/api/v1/users/nosuch/enable" }, nil, access{401, 403, 403, 403, 404}},
		{"PUT /api/v1/users/:name/unix-name", func(*testing.T) string { return "/api/v1/users/bob/unix-name" },
			func() string { return `{"unix_name":"bob2"}` }, access{401, 403, 403, 403, 200}},
		{"DELETE /api/v1/users/:name", func(*testing.T) string { return "/api/v1/users/nosuch" }, nil, access{401, 403, 403, 403, 404}},
		{"DELETE /api/v1/machines/:name", func(*testing.T) string { return "/api/v1/machines/none" }, nil, access{401, 403, 403, 403, 404}},
		{"POST /api/v1/nodes/:name/uncordon", func(*testing.T) string { return "/api/v1/nodes/none/uncordon" }, nil, access{401, 403, 403, 403, 404}},
		{"POST /api/v1/nodes/:name/gpus/:index/clear", func(*testing.T) string { return "/api/v1/nodes/none/gpus/0/clear" }, nil, access{401, 403, 403, 403, 404}},
		{"GET /api/v1/jobs/:id/logs", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/logs" }, nil, access{401, 404, 404, 404, 404}}, // 404: no output yet
		{"GET /api/v1/stats/jct", nil, nil, apiAll},
		// By team: researchers see only their own usage.
		{"GET /api/v1/accounting", func(*testing.T) string { return "/api/v1/accounting?by=team" }, nil, access{401, 403, 403, 200, 200}},
		{"GET /api/v1/stats/estimates", nil, nil, apiAll},
		{"GET /api/v1/jobs", nil, nil, apiAll},
		{"POST /api/v1/jobs", nil, func() string {
			return `{"name":"x","team":"vision","gpus":1,"sim":{"duration_s":5}}`
		}, access{401, 201, 400, 201, 201}},
		{"GET /api/v1/jobs/:id", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) }, nil, apiTeamJob},
		{"GET /api/v1/jobs/:id/history", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/history" }, nil, apiTeamJob},
		{"GET /api/v1/jobs/:id/memory", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/memory" }, nil, apiTeamJob},
		{"GET /api/v1/jobs/:id/usage", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/usage" }, nil, apiTeamJob},
		{"POST /api/v1/jobs/:id/keep-alive", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/keep-alive" }, func() string { return `{"hours":1}` }, access{401, 409, 404, 409, 409}},
		{"DELETE /api/v1/jobs/:id", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) }, nil, apiTeamJob},
		{"POST /api/v1/jobs/:id/resubmit", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/resubmit" }, nil, access{401, 201, 404, 201, 201}},
		{"GET /api/v1/arrays/:id", func(t *testing.T) string { return fmt.Sprint("/api/v1/arrays/", ts.newArray(t)) }, nil, apiTeamJob},
		// A job's files (files.go): its job has not run, so it has none
		// (409) for whoever sees it; uploads are its owner's and admins'.
		{"GET /api/v1/jobs/:id/files", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/files" }, nil, access{401, 409, 404, 409, 409}},
		{"GET /api/v1/jobs/:id/files/content", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/files/content?path=x" }, nil, access{401, 409, 404, 409, 409}},
		{"GET /api/v1/jobs/:id/files/archive", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/files/archive" }, nil, access{401, 409, 404, 409, 409}},
		{"PUT /api/v1/jobs/:id/files/content", func(t *testing.T) string { return "/api/v1/jobs/" + job(t) + "/files/content?path=x" }, func() string { return "data" }, access{401, 409, 404, 403, 409}},
		{"GET /jobs/:id/files", func(t *testing.T) string { return "/jobs/" + job(t) + "/files" }, nil, teamJob},
		{"GET /jobs/:id/files/checkpoints", func(t *testing.T) string { return "/jobs/" + job(t) + "/files/checkpoints" }, nil, teamJob},
		{"GET /jobs/:id/files/content", func(t *testing.T) string { return "/jobs/" + job(t) + "/files/content?path=x" }, nil, access{303, 409, 404, 409, 409}},
		{"GET /jobs/:id/files/archive", func(t *testing.T) string { return "/jobs/" + job(t) + "/files/archive" }, nil, access{303, 409, 404, 409, 409}},
		// Without a file: refused as such once the job is seen.
		{"POST /jobs/:id/files/upload", func(t *testing.T) string { return "/jobs/" + job(t) + "/files/upload" }, func() string { return form("root", "job") }, access{303, 400, 404, 400, 400}},
		{"DELETE /api/v1/arrays/:id", func(t *testing.T) string { return fmt.Sprint("/api/v1/arrays/", ts.newArray(t)) }, nil, apiTeamJob},
	}

	covered := map[string]bool{}
	// forbidden: the routes some role was refused with 403, for
	// checkDocumented403.
	forbidden := map[string]bool{}
	for _, rule := range rules {
		covered[rule.route] = true
		method, path, _ := strings.Cut(rule.route, " ")
		for i, role := range roles {
			t.Run(rule.route+" as "+role, func(t *testing.T) {
				target := path
				if rule.target != nil {
					target = rule.target(t)
				}
				body := ""
				if rule.body != nil {
					body = rule.body()
				}
				session := ts.sessions[role]
				if rule.route == "POST /logout" && role != "anonymous" {
					session = ts.freshSession(t, role) // logging out ends it
				}
				if rule.route == "DELETE /api/v1/tokens/current" && role != "anonymous" {
					kept := ts.tokens[role]
					ts.tokens[role] = ts.freshToken(t, role) // revoking ends it
					defer func() { ts.tokens[role] = kept }()
				}
				rec := ts.doAs(t, role, session, method, target, body)
				if rec.Code == http.StatusForbidden {
					forbidden[rule.route] = true
				}
				if rec.Code != rule.want[i] {
					t.Errorf("%s %s as %s: status %d, want %d; body %.200s", method, target, role, rec.Code, rule.want[i], rec.Body.String())
				}
			})
		}
	}
	var missing []string
	for _, r := range ts.echo.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		if key := r.Method + " " + r.Path; !covered[key] {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("routes without an access rule in this test: %v", missing)
	}
	for _, tc := range other403s(t, ts) {
		t.Run(tc.route+" refused: "+tc.why, func(t *testing.T) {
			if rec := tc.do(t); rec.Code != http.StatusForbidden {
				t.Errorf("status %d, want 403; body %.200s", rec.Code, rec.Body.String())
				return
			}
			forbidden[tc.route] = true
		})
	}
	checkDocumented403(t, forbidden)
}

// forbiddenCase is a 403 the role table does not show: one that depends
// on what is asked, not only on who asks.
type forbiddenCase struct {
	route string // as registered
	why   string
	do    func(t *testing.T) *httptest.ResponseRecorder
}

func other403s(t *testing.T, ts *testServer) []forbiddenCase {
	basic := func(user string) func(t *testing.T) *httptest.ResponseRecorder {
		return func(t *testing.T) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "/api/v1/tokens", nil)
			req.SetBasicAuth(user, "password1")
			rec := httptest.NewRecorder()
			ts.Handler().ServeHTTP(rec, req)
			return rec
		}
	}
	get := func(role, target string) func(t *testing.T) *httptest.ResponseRecorder {
		return func(t *testing.T) *httptest.ResponseRecorder { return ts.do(t, role, http.MethodGet, target, "") }
	}
	ctx := context.Background()
	if _, err := ts.store.CreateUser(ctx, "gone", "password1", models.RoleResearcher, "vision"); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.DisableUser(ctx, "gone", "admin", time.Now()); err != nil {
		t.Fatal(err)
	}
	// carol is alice's teammate: she sees alice's jobs, but may not act
	// on them as their owner or lead would.
	carol, err := ts.store.CreateUser(ctx, "carol", "password1", models.RoleResearcher, "vision")
	if err != nil {
		t.Fatal(err)
	}
	carolToken, err := ts.store.CreateAPIToken(ctx, carol.ID, "test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	asCarol := func(method string, target func(t *testing.T) string, body string) func(t *testing.T) *httptest.ResponseRecorder {
		return func(t *testing.T) *httptest.ResponseRecorder {
			req := httptest.NewRequest(method, target(t), strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+carolToken)
			rec := httptest.NewRecorder()
			ts.Handler().ServeHTTP(rec, req)
			return rec
		}
	}
	job := func(t *testing.T) string { return fmt.Sprint("/api/v1/jobs/", ts.newJob(t)) }
	array := func(t *testing.T) string { return fmt.Sprint("/api/v1/arrays/", ts.newArray(t)) }
	return []forbiddenCase{
		{"POST /api/v1/tokens", "a disabled account", basic("gone")},
		{"DELETE /api/v1/jobs/:id", "a teammate cancels another's job", asCarol(http.MethodDelete, job, "")},
		{"POST /api/v1/jobs/:id/keep-alive", "a teammate keeps another's job alive", asCarol(http.MethodPost, func(t *testing.T) string { return job(t) + "/keep-alive" }, `{"hours":1}`)},
		{"DELETE /api/v1/arrays/:id", "a teammate cancels another's array", asCarol(http.MethodDelete, array, "")},
		{"POST /api/v1/jobs/:id/resubmit", "a teammate resubmits another's job", asCarol(http.MethodPost, func(t *testing.T) string { return job(t) + "/resubmit" }, "")},
		{"GET /api/v1/jobs/:id/files", "a teammate reads another's data path", asCarol(http.MethodGet, func(t *testing.T) string { return job(t) + "/files?root=scratch" }, "")},
		{"GET /api/v1/jobs/:id/files/content", "a teammate reads another's data path", asCarol(http.MethodGet, func(t *testing.T) string { return job(t) + "/files/content?root=scratch&path=x" }, "")},
		{"GET /api/v1/jobs/:id/files/archive", "a teammate reads another's data path", asCarol(http.MethodGet, func(t *testing.T) string { return job(t) + "/files/archive?root=scratch" }, "")},
		{"PUT /api/v1/jobs/:id/files/content", "a teammate uploads into another's job", asCarol(http.MethodPut, func(t *testing.T) string { return job(t) + "/files/content?path=x" }, "data")},
		{"GET /api/v1/jobs", "a researcher asks for every team's jobs", get("alice", "/api/v1/jobs?scope=all")},
		{"GET /api/v1/jobs", "a researcher asks for another team's jobs", get("alice", "/api/v1/jobs?team=nlp")},
	}
}

// checkDocumented403 checks that web/openapi.json documents a 403 on
// exactly the API operations that answered one (forbidden, by route as
// registered): a refusal the document does not list, or a 403 the
// document promises where the server never refuses, fails.
func checkDocumented403(t *testing.T, forbidden map[string]bool) {
	t.Helper()
	doc := loadOpenAPI(t)
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			var op struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if method == "parameters" {
				continue
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if _, ok := op.Responses["403"]; ok {
				documented[method+" "+path] = true
			}
		}
	}
	refused := map[string]bool{}
	for route := range forbidden {
		method, path, _ := strings.Cut(route, " ")
		if p, ok := openAPIPath(path); ok {
			refused[strings.ToLower(method)+" "+p] = true
		}
	}
	var undocumented, never []string
	for k := range refused {
		if !documented[k] {
			undocumented = append(undocumented, k)
		}
	}
	for k := range documented {
		if !refused[k] {
			never = append(never, k)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(never)
	if len(undocumented) > 0 {
		t.Errorf("operations that answer 403 without documenting it in openapi.json: %v", undocumented)
	}
	if len(never) > 0 {
		t.Errorf("openapi.json documents a 403 that no test provokes (add the case to other403s, or drop the 403): %v", never)
	}
	t.Logf("%d operations answer and document 403", len(refused))
}

// TestCSRF refuses page forms without the token of their session: none,
// the pre-session token, or another session's.
func TestCSRF(t *testing.T) {
	ts := newTestServer(t)
	tests := []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", http.StatusForbidden},
		{"a made-up token", strings.Repeat("0", 64), http.StatusForbidden},
		{"another session's token", sessionCSRF(ts.sessions["bob"]), http.StatusForbidden},
		{"the pre-session token", preSessionCSRF, http.StatusForbidden},
		{"its own session's token", sessionCSRF(ts.sessions["alice"]), http.StatusSeeOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			form := "name=x&team=vision&gpus=1&kind=sim&duration_s=5"
			if tc.token != "" {
				form += "&_csrf=" + tc.token
			}
			req := httptest.NewRequest(http.MethodPost, "/jobs", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(&http.Cookie{Name: sessionCookie, Value: ts.sessions["alice"]})
			req.AddCookie(&http.Cookie{Name: csrfCookie, Value: preSessionCSRF})
			rec := httptest.NewRecorder()
			ts.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d; body %.200s", rec.Code, tc.want, rec.Body.String())
			}
		})
	}
}

// TestLoginThrottle slows failures per (account, address): the address
// that failed waits, another address logs in at once with the right
// password, and the same address may try another account.
func TestLoginThrottle(t *testing.T) {
	ts := newTestServer(t)
	// A stopped clock: the delays are judged by it, not by how long the
	// password checks take on a busy machine.
	frozen := time.Now()
	ts.cfg.Now = func() time.Time { return frozen }
	login := func(from, user, password string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{
			"username": {user}, "password": {password}, "_csrf": {preSessionCSRF}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: csrfCookie, Value: preSessionCSRF})
		req.RemoteAddr = from + ":40000"
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, req)
		return rec
	}
	for i := range pairFree {
		if rec := login("192.0.2.1", "admin", "wrong"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d", i+1, rec.Code)
		}
	}
	if rec := login("192.0.2.1", "admin", "wrong"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("failure %d: status %d, want 401 (it starts the delay)", pairFree+1, rec.Code)
	}
	rec := login("192.0.2.1", "admin", "password1")
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "Too many failed logins") || rec.Header().Get("Retry-After") == "" {
		t.Errorf("right password from the failing address during its delay: status %d, Retry-After %q; body %.300s",
			rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
	}
	if rec := login("192.0.2.2", "admin", "password1"); rec.Code != http.StatusSeeOther {
		t.Errorf("right password from another address: status %d, want 303 (no lock-out from elsewhere)", rec.Code)
	}
	if rec := login("192.0.2.1", "alice", "password1"); rec.Code != http.StatusSeeOther {
		t.Errorf("another account from the failing address: status %d, want 303", rec.Code)
	}
}

// credEvent is what happens to a live connection's user or credential
// in TestTopicsFollowTheCredential.
type credEvent struct {
	name string
	kind credKind // the credential it applies to; 0: both
	// ends: the connection must close with closeCredentialEnded.
	ends bool
	// ttl of the credential; 0 is an hour.
	ttl time.Duration
	// do applies the event to user u (their credential is cred).
	do func(t *testing.T, ts *testServer, u *models.User, cred string)
	// after is the user as the event leaves them (team changes).
	after func(u models.User) models.User
}

// TestTopicsFollowTheCredential is the live stream's part of the route x
// role table: for each role, credential kind and credential state, a
// connection subscribed to every topic the user may see keeps the topics
// the user still may see and loses the others, or is closed.
func TestTopicsFollowTheCredential(t *testing.T) {
	ls := newLiveServer(t)
	ctx := context.Background()
	job := ls.newJob(t)       // alice's, team vision: it runs and updates every frame
	t.Cleanup(feedFrames(ls)) // parallel subtests run after this function returns
	adminAPI := func(t *testing.T, method, target string) {
		t.Helper()
		if rec := ls.do(t, "admin", method, target, ""); rec.Code >= 300 {
			t.Fatalf("%s %s: %d %s", method, target, rec.Code, rec.Body.String())
		}
	}
	moveTeam := func(u models.User) models.User {
		switch {
		case u.Role == models.RoleAdmin:
			u.Role, u.Team = models.RoleResearcher, "nlp" // an admin demoted
		case u.Team == "vision":
			u.Team = "nlp"
		default:
			u.Team = "vision"
		}
		return u
	}
	events := []credEvent{
		{name: "live"},
		{name: "logged out", kind: credSession, ends: true, do: func(t *testing.T, ts *testServer, u *models.User, cred string) {
			if rec := ts.doAs(t, u.Name, cred, http.MethodPost, "/logout", ""); rec.Code != http.StatusSeeOther {
				t.Fatalf("logout: %d", rec.Code)
			}
		}},
		{name: "token revoked", kind: credToken, ends: true, do: func(t *testing.T, ts *testServer, u *models.User, cred string) {
			toks, err := ts.store.APITokens(ctx, u.ID, time.Now())
			if err != nil || len(toks) != 1 {
				t.Fatalf("tokens of %s: %v %v", u.Name, toks, err)
			}
			adminAPI(t, http.MethodDelete, fmt.Sprintf("/api/v1/users/%s/tokens/%d", u.Name, toks[0].ID))
		}},
		// Long enough to read every snapshot first on a loaded machine
		// (1.5 s was not: an admin's seven topics, in CI).
		{name: "expired", ends: true, ttl: 4 * time.Second},
		{name: "password reset", ends: true, do: func(t *testing.T, ts *testServer, u *models.User, cred string) {
			if rec := ts.do(t, "admin", http.MethodPost, "/admin/reset-password", "name="+u.Name+"&password=another-password"); rec.Code != http.StatusOK {
				t.Fatalf("reset: %d %.300s", rec.Code, rec.Body.String())
			}
		}},
		{name: "disabled", ends: true, do: func(t *testing.T, ts *testServer, u *models.User, cred string) {
			adminAPI(t, http.MethodPost, "/api/v1/users/"+u.Name+"/disable")
		}},
		{name: "deleted", ends: true, do: func(t *testing.T, ts *testServer, u *models.User, cred string) {
			adminAPI(t, http.MethodDelete, "/api/v1/users/"+u.Name)
		}},
		// As `gpuportal admin set-role` does, in the store: the periodic
		// check finds it.
		{name: "team changed", after: moveTeam, do: func(t *testing.T, ts *testServer, u *models.User, cred string) {
			v := moveTeam(*u)
			if err := ts.store.SetRole(ctx, u.Name, v.Role, v.Team); err != nil {
				t.Fatal(err)
			}
		}},
	}
	roleOf := map[string]struct {
		role models.Role
		team string
	}{"alice": {models.RoleResearcher, "vision"}, "bob": {models.RoleResearcher, "nlp"}, "lead": {models.RoleLead, "vision"}, "admin": {models.RoleAdmin, ""}}
	topics := []string{topicGPUs, topicQueues, topicJCT, "gpu:" + ls.gpus[0].UUID, fmt.Sprintf("job:%d", job), "team:vision", "team:nlp"}
	n := 0
	for _, role := range []string{"alice", "bob", "lead", "admin"} {
		for _, kind := range []credKind{credSession, credToken} {
			for _, ev := range events {
				if ev.kind != 0 && ev.kind != kind {
					continue
				}
				n++
				name := fmt.Sprintf("u%d", n)
				t.Run(fmt.Sprintf("%s with a %s, %s", role, kind, ev.name), func(t *testing.T) {
					t.Parallel()
					r := roleOf[role]
					u, err := ls.store.CreateUser(ctx, name, "password1", r.role, r.team)
					if err != nil {
						t.Fatal(err)
					}
					ttl := cmp.Or(ev.ttl, time.Hour)
					var cred string
					hdr := http.Header{}
					created := time.Now()
					if kind == credSession {
						cred, err = ls.store.CreateSession(ctx, u.ID, created, ttl)
						hdr.Set("Cookie", sessionCookie+"="+cred)
					} else {
						cred, err = ls.store.CreateAPIToken(ctx, u.ID, "t", created, ttl)
						hdr.Set("Authorization", "Bearer "+cred)
					}
					if err != nil {
						t.Fatal(err)
					}
					var mine []string
					for _, tp := range topics {
						if ls.mayFollow(ctx, viewOf(u), tp, map[int64]string{}) == nil {
							mine = append(mine, tp)
						}
					}
					conn, _, err := websocket.DefaultDialer.Dial(ls.url+"?topics="+strings.Join(mine, ","), hdr)
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close()
					st := newStream(conn)
					for _, tp := range mine {
						st.await(t, 5*time.Second, tp+" snapshot", func(m wsMsg) bool { return m.Topic == tp && m.Type == "snapshot" })
					}
					if ev.do != nil {
						ev.do(t, ls.testServer, u, cred)
					}
					if ev.ends {
						code := st.closed(t, max(time.Until(created.Add(ev.ttl)), 0)+5*time.Second)
						if code != closeCredentialEnded {
							t.Errorf("closed with %d, want %d", code, closeCredentialEnded)
						}
						if ev.ttl > 0 && time.Since(created) < ev.ttl {
							t.Errorf("closed %v after the credential was made, before it expired (%v)", time.Since(created), ev.ttl)
						}
						return
					}
					after := *u
					if ev.after != nil {
						after = ev.after(after)
					}
					var kept, lost []string
					for _, tp := range mine {
						if ls.mayFollow(ctx, viewOf(&after), tp, map[int64]string{}) == nil {
							kept = append(kept, tp)
						} else {
							lost = append(lost, tp)
						}
					}
					for _, tp := range lost {
						st.await(t, 5*time.Second, tp+" unsubscribed", func(m wsMsg) bool {
							return m.Topic == tp && m.Type == "error" && strings.Contains(m.Error, "unsubscribed")
						})
					}
					// From now on: updates of every kept topic that changes each
					// frame, none of a lost one.
					since := st.mark()
					st.await(t, 5*time.Second, "gpus updates", func(m wsMsg) bool { return m.Topic == topicGPUs && m.Type == "update" })
					if slices.Contains(kept, fmt.Sprintf("job:%d", job)) {
						st.await(t, 5*time.Second, "job updates", func(m wsMsg) bool { return m.Topic == fmt.Sprintf("job:%d", job) && m.Type == "update" })
					}
					time.Sleep(time.Second)
					for _, m := range st.from(since) {
						if slices.Contains(lost, m.Topic) {
							t.Errorf("after losing %s: %s message %.120s", m.Topic, m.Type, m.Data)
						}
					}
				})
			}
		}
	}
}

// feedFrames records a GPU sample of node-0 every 200ms, each unlike the
// last, until the returned function is called.
func feedFrames(ls *liveServer) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := int64(0); ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			at := time.Now()
			ls.cfg.Telemetry.Record("node-0", []gpu.Sample{
				{At: at, Index: 0, MemUsedMiB: 100 + i%500, MemMiB: 1024},
				{At: at, Index: 1, MemUsedMiB: 200 + i%500, MemMiB: 1024},
			})
		}
	}()
	return func() { close(done); <-stopped }
}

// stream reads a live connection in the background, keeping every
// message and how the connection closed.
type stream struct {
	mu   sync.Mutex
	msgs []wsMsg
	code int // the close code, once closed
	more chan struct{}
	done chan struct{}
}

func newStream(c *websocket.Conn) *stream {
	st := &stream{more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		for {
			var m wsMsg
			err := c.ReadJSON(&m)
			st.mu.Lock()
			if err != nil {
				st.code = -1
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					st.code = ce.Code
				}
				st.mu.Unlock()
				return
			}
			st.msgs = append(st.msgs, m)
			st.mu.Unlock()
			select {
			case st.more <- struct{}{}:
			default:
			}
		}
	}()
	return st
}

// mark is where the messages read so far end.
func (st *stream) mark() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.msgs)
}

// from returns the messages read since mark i.
func (st *stream) from(i int) []wsMsg {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.msgs[i:])
}

// await waits until a message read since await was called satisfies ok.
func (st *stream) await(t *testing.T, timeout time.Duration, what string, ok func(wsMsg) bool) {
	t.Helper()
	seen := 0
	deadline := time.After(timeout)
	for {
		for _, m := range st.from(seen) {
			if ok(m) {
				return
			}
			seen++
		}
		select {
		case <-st.more:
		case <-st.done:
			if len(st.from(seen)) == 0 {
				t.Fatalf("connection closed (code %d) waiting for %s", st.code, what)
			}
		case <-deadline:
			t.Fatalf("no %s within %v", what, timeout)
		}
	}
}

// closed waits for the connection to close and returns its close code.
func (st *stream) closed(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-st.done:
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.code
	case <-time.After(timeout):
		t.Fatalf("still open %v later", timeout)
		return 0
	}
}
