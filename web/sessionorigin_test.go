package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

func TestParseSessionOrigin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, err string
		want    sessionOrigin
	}{
		{in: "https://*.sessions.lab.example", want: sessionOrigin{scheme: "https", domain: "sessions.lab.example"}},
		{in: "http://*.localhost:8081/", want: sessionOrigin{scheme: "http", domain: "localhost", port: "8081"}},
		{in: "HTTPS://*.Sessions.Example", want: sessionOrigin{scheme: "https", domain: "sessions.example"}},
		{in: "https://sessions.lab.example", err: "*.DOMAIN"},
		{in: "https://*.", err: "*.DOMAIN"},
		{in: "https://a.*.example", err: "*.DOMAIN"},
		{in: "https://*.*.example", err: "*.DOMAIN"},
		{in: "https://*.bad_name.example", err: "*.DOMAIN"},
		{in: "ftp://*.example", err: "http://"},
		{in: "https://*.example/path", err: "only a scheme and a host"},
		{in: "https://u@*.example", err: "only a scheme and a host"},
		{in: "https://*.example:0", err: "port"},
		{in: "https://*.example:99999", err: "port"},
		{in: "::", err: "not a URL"},
	} {
		t.Run(c.in, func(t *testing.T) {
			o, err := parseSessionOrigin(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *o != c.want {
				t.Errorf("got %+v, want %+v", *o, c.want)
			}
		})
	}
}

func TestSessionOriginHosts(t *testing.T) {
	t.Parallel()
	same, _ := parseSessionOrigin("http://*.localhost")
	fixed, _ := parseSessionOrigin("https://*.sessions.example:8443")
	for _, c := range []struct {
		o          *sessionOrigin
		id         int64
		portalHost string
		want       string
	}{
		{same, 12, "127.0.0.1:8080", "http://s12.localhost:8080"},
		{same, 12, "portal", "http://s12.localhost"},
		{same, 3, "portal:80", "http://s3.localhost"},
		{fixed, 7, "portal.example", "https://s7.sessions.example:8443"},
	} {
		if got := c.o.urlFor(c.id, c.portalHost); got != c.want {
			t.Errorf("%s: urlFor(%d, %q) = %q, want %q", c.o, c.id, c.portalHost, got, c.want)
		}
	}
	for _, c := range []struct {
		o    *sessionOrigin
		host string
		id   int64
		ok   bool
	}{
		{same, "s12.localhost:8080", 12, true},
		{same, "S12.LOCALHOST", 12, true},
		{same, "localhost:8080", 0, false},
		{same, "127.0.0.1:8080", 0, false},
		{same, "s012.localhost", 0, false},
		{same, "s0.localhost", 0, false},
		{same, "x12.localhost", 0, false},
		{same, "s12x.localhost", 0, false},
		{same, "a.s12.localhost", 0, false},
		{same, "s99999999999999999999.localhost", 0, false},
		{same, "s12.localhost.evil.example", 0, false},
		{fixed, "s7.sessions.example:8443", 7, true},
		{fixed, "s7.sessions.example:8080", 0, false},
	} {
		id, ok := c.o.jobOf(c.host)
		if id != c.id || ok != c.ok {
			t.Errorf("%s: jobOf(%q) = %d, %v; want %d, %v", c.o, c.host, id, ok, c.id, c.ok)
		}
	}
}

func TestSessionKeysSingleUse(t *testing.T) {
	t.Parallel()
	k := newSessionKeys()
	now := time.Now()
	p := sessionPass{cred: credential{kind: credSession, hash: "h"}, job: 4}
	g, err := k.grant(p, now)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := k.redeem(g, now.Add(time.Second)); !ok || got.job != 4 || got.cred != p.cred {
		t.Fatalf("redeem = %+v, %v", got, ok)
	}
	if _, ok := k.redeem(g, now.Add(time.Second)); ok {
		t.Error("a grant was redeemed twice")
	}
	late, _ := k.grant(p, now)
	if _, ok := k.redeem(late, now.Add(grantTTL)); ok {
		t.Error("a grant was redeemed after grantTTL")
	}
	v, _ := k.pass(p, now)
	if _, ok := k.lookup(v, now.Add(passTTL-time.Second)); !ok {
		t.Error("a pass was refused before passTTL")
	}
	if _, ok := k.lookup(v, now.Add(passTTL)); ok {
		t.Error("a pass was taken after passTTL")
	}
	if _, ok := k.lookup(g, now); ok {
		t.Error("a grant's value was taken as a pass")
	}
	// Bounded: many grants never grow the map past maxGrants.
	for range maxGrants + 10 {
		if _, err := k.grant(p, now); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(k.grants); n > maxGrants {
		t.Errorf("%d grants kept, at most %d", n, maxGrants)
	}
}

// sessionOriginServer is a test server whose sessions are served at
// http://sID.sessions.test, the portal at http://portal.test.
func sessionOriginServer(t *testing.T) *testServer {
	return newTestServer(t, func(c *testConfig) {
		c.SessionOrigin, c.PortalURL = "http://*.sessions.test", "http://portal.test"
	})
}

// hostRequest is a request to target at host, with cookies.
func hostRequest(method, host, target string, cookies ...*http.Cookie) *http.Request {
	req := httptest.NewRequest(method, target, nil)
	req.Host = host
	req.Header.Set("Accept", "text/html")
	for _, ck := range cookies {
		req.AddCookie(ck)
	}
	return req
}

func (ts *testServer) serve(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	ts.Handler().ServeHTTP(rec, req)
	return rec
}

// enterSession hands role's browser over to the session at prefix: the
// pass cookie its host gives.
func (ts *testServer) enterSession(t *testing.T, role, prefix string) (*http.Cookie, string) {
	t.Helper()
	rec := ts.serve(hostRequest(http.MethodGet, "portal.test", prefix+"tree?x=1",
		&http.Cookie{Name: sessionCookie, Value: ts.sessions[role]}))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("%s opening %s on the portal: %d %s", role, prefix, rec.Code, rec.Body)
	}
	to, err := url.Parse(rec.Header().Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if to.Path != enterPath || to.Query().Get("grant") == "" || to.Query().Get("next") != prefix+"tree?x=1" {
		t.Fatalf("handed over to %s", to)
	}
	rec = ts.serve(hostRequest(http.MethodGet, to.Host, to.RequestURI()))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != prefix+"tree?x=1" {
		t.Fatalf("entering with the grant: %d, to %q", rec.Code, rec.Header().Get("Location"))
	}
	var pass *http.Cookie
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == passCookie {
			pass = ck
		}
	}
	if pass == nil || !pass.HttpOnly || pass.Domain != "" || pass.SameSite != http.SameSiteLaxMode {
		t.Fatalf("the session's host set %+v, want an HttpOnly, host-only, SameSite=Lax pass", pass)
	}
	// The grant is good once.
	if again := ts.serve(hostRequest(http.MethodGet, to.Host, to.RequestURI())); len(again.Result().Cookies()) != 0 ||
		!strings.HasPrefix(again.Header().Get("Location"), "http://portal.test/jobs/") {
		t.Errorf("a grant used twice: %d to %q, cookies %v", again.Code, again.Header().Get("Location"), again.Result().Cookies())
	}
	return pass, to.Host
}

// A browser opening a session on the portal is handed over to the
// session's own host with a single-use grant; there, only the pass it got
// for that session, for a login that still holds, opens it.
func TestSessionOriginHandover(t *testing.T) {
	t.Parallel()
	ts := sessionOriginServer(t)
	prefix := ts.newSession(t)
	id, _ := strconv.ParseInt(strings.Split(prefix, "/")[2], 10, 64)
	pass, host := ts.enterSession(t, "alice", prefix)
	if want := "s" + strconv.FormatInt(id, 10) + ".sessions.test"; host != want {
		t.Fatalf("handed over to host %q, want %q", host, want)
	}
	// With the pass: through to the session (queued: its waiting page,
	// drawn with links back to the portal).
	rec := ts.serve(hostRequest(http.MethodGet, host, prefix+"tree", pass))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `href="http://portal.test/jobs/`) {
		t.Fatalf("alice with her pass: %d\n%.400s", rec.Code, rec.Body)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("the waiting page's policy: %q", csp)
	}
	other := ts.newSession(t)
	otherID := strings.Split(other, "/")[2]
	for _, c := range []struct {
		name string
		req  *http.Request
	}{
		{"no cookie", hostRequest(http.MethodGet, host, prefix+"tree")},
		{"the portal's cookie", hostRequest(http.MethodGet, host, prefix+"tree", &http.Cookie{Name: sessionCookie, Value: ts.sessions["alice"]})},
		{"the pass on another session's host", hostRequest(http.MethodGet, "s"+otherID+".sessions.test", other+"tree", pass)},
		{"a forged pass", hostRequest(http.MethodGet, host, prefix+"tree", &http.Cookie{Name: passCookie, Value: strings.Repeat("a", 64)})},
	} {
		rec := ts.serve(c.req)
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "http://portal.test/sessions/") {
			t.Errorf("%s: %d to %q, want 303 back to the portal", c.name, rec.Code, rec.Header().Get("Location"))
		}
	}
	// Not a browser's navigation: refused, not redirected.
	ws := hostRequest(http.MethodGet, host, prefix+"api/kernels/k/channels")
	ws.Header.Set("Upgrade", "websocket")
	if rec := ts.serve(ws); rec.Code != http.StatusUnauthorized {
		t.Errorf("a websocket without a pass: %d, want 401", rec.Code)
	}
	// From another session's pages: refused.
	cross := hostRequest(http.MethodPost, host, prefix+"api/contents", pass)
	cross.Header.Set("Origin", "http://s"+otherID+".sessions.test")
	if rec := ts.serve(cross); rec.Code != http.StatusForbidden {
		t.Errorf("a POST from another session's origin: %d, want 403", rec.Code)
	}
	// On the portal, a browser's unsafe request is not served at all.
	post := hostRequest(http.MethodPost, "portal.test", prefix+"api/contents", &http.Cookie{Name: sessionCookie, Value: ts.sessions["alice"]})
	post.Header.Set(csrfHeader, sessionCSRF(ts.sessions["alice"]))
	if rec := ts.serve(post); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "its own address") {
		t.Errorf("a POST to the session on the portal's origin: %d %s", rec.Code, rec.Body)
	}
	// Bob is refused on the portal, before any grant.
	if rec := ts.serve(hostRequest(http.MethodGet, "portal.test", prefix+"tree", &http.Cookie{Name: sessionCookie, Value: ts.sessions["bob"]})); rec.Code != http.StatusForbidden {
		t.Errorf("bob opening alice's session: %d, want 403", rec.Code)
	}
	// alice logs out: her pass ends with her login.
	if err := ts.store.DeleteSession(context.Background(), ts.sessions["alice"]); err != nil {
		t.Fatal(err)
	}
	if rec := ts.serve(hostRequest(http.MethodGet, host, prefix+"tree", pass)); rec.Code != http.StatusSeeOther {
		t.Errorf("alice's pass after logout: %d, want 303 to the portal", rec.Code)
	}
	// The portal's own pages forbid framing and foreign scripts.
	rec = ts.serve(hostRequest(http.MethodGet, "portal.test", "/login"))
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("the login page's policy: %q", csp)
	}
}

// An admin opening alice's session is audited, once, at the handover.
func TestSessionOriginAdminAudited(t *testing.T) {
	t.Parallel()
	ts := sessionOriginServer(t)
	prefix := ts.newSession(t)
	pass, host := ts.enterSession(t, "admin", prefix)
	if rec := ts.serve(hostRequest(http.MethodGet, host, prefix+"tree", pass)); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("the admin with a pass: %d", rec.Code)
	}
	entries, err := ts.store.AuditLog(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Action == "session.open" && e.Actor == "admin" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d session.open entries by admin, want 1: %+v", n, entries)
	}
}

// Requests being proxied end when their user may no longer open the
// session: logout, a disabled account, a revoked token, the run's end.
func TestSessionRecheckEndsRequests(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	j := &models.Job{Name: "nb", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(),
		SessionType: "terminal", SessionSecret: "k1.salt"}
	if err := ts.store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	run, err := ts.store.MarkStarted(ctx, j.ID, []string{"gone:0"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if j, err = ts.store.Job(ctx, j.ID); err != nil || j.State != job.Running || j.Run != run {
		t.Fatalf("the running session: %+v, %v", j, err)
	}
	id := j.ID
	live := func(cred credential, run int64) context.Context {
		c, cancel := context.WithCancel(ctx)
		ts.Server.sessions.track(&liveRequest{cred: cred, job: id, run: run, cancel: cancel})
		return c
	}
	session := func(role string) credential {
		return credential{kind: credSession, hash: models.HashToken(ts.sessions[role])}
	}
	alice := live(session("alice"), j.Run)
	admin := live(session("admin"), j.Run)
	token := live(credential{kind: credToken, hash: models.HashToken(ts.tokens["alice"])}, j.Run)
	stale := live(session("admin"), j.Run+1)
	if err := ts.Server.sessions.recheck(ctx); err != nil {
		t.Fatal(err)
	}
	if alice.Err() != nil || admin.Err() != nil || token.Err() != nil {
		t.Fatal("a request whose user may open the session was ended")
	}
	if stale.Err() == nil {
		t.Error("a request to an earlier run was not ended")
	}
	if err := ts.store.DeleteSession(ctx, ts.sessions["alice"]); err != nil {
		t.Fatal(err)
	}
	if err := ts.Server.sessions.recheck(ctx); err != nil {
		t.Fatal(err)
	}
	if alice.Err() == nil {
		t.Error("alice's request lives on after her logout")
	}
	if token.Err() != nil {
		t.Error("alice's token request ended with her login")
	}
	if _, err := ts.store.DisableUser(ctx, "alice", "admin", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := ts.Server.sessions.recheck(ctx); err != nil {
		t.Fatal(err)
	}
	if token.Err() == nil {
		t.Error("disabled alice's token request lives on")
	}
	if admin.Err() != nil {
		t.Error("the admin's request ended with alice's account")
	}
}
