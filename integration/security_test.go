package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
)

// The tests of issue 16: what holds after a credential was accepted, and
// the limits around it, against the real binary.

// liveConn is a websocket to /ws read in the background: every message,
// and when and how it closed.
type liveConn struct {
	mu       sync.Mutex
	msgs     []streamMsg
	code     int // close code; -1 for another error
	closedAt time.Time
	done     chan struct{}
}

// dialLive opens /ws on base with hdr (a cookie or a bearer token),
// subscribed to topics, and waits for a snapshot of each.
func dialLive(t *testing.T, base string, hdr http.Header, topics ...string) *liveConn {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/ws?topics="+strings.Join(topics, ","), hdr)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("websocket: %v (status %d)", err, status)
	}
	t.Cleanup(func() { conn.Close() })
	lc := &liveConn{done: make(chan struct{})}
	go func() {
		defer close(lc.done)
		for {
			var m wsMsg
			err := conn.ReadJSON(&m)
			lc.mu.Lock()
			if err != nil {
				lc.code, lc.closedAt = -1, time.Now()
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					lc.code = ce.Code
				}
				lc.mu.Unlock()
				return
			}
			lc.msgs = append(lc.msgs, streamMsg{at: time.Now(), wsMsg: m})
			lc.mu.Unlock()
		}
	}()
	for _, tp := range topics {
		lc.await(t, 15*time.Second, tp+" snapshot", func(m wsMsg) bool { return m.Topic == tp && m.Type == "snapshot" })
	}
	return lc
}

// since returns the messages that came after at.
func (lc *liveConn) since(at time.Time) []wsMsg {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	var out []wsMsg
	for _, m := range lc.msgs {
		if m.at.After(at) {
			out = append(out, m.wsMsg)
		}
	}
	return out
}

// await waits for a message that ok accepts.
func (lc *liveConn) await(t *testing.T, timeout time.Duration, what string, ok func(wsMsg) bool) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, timeout, what, func() bool {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		for _, m := range lc.msgs {
			if ok(m.wsMsg) {
				at = m.at
				return true
			}
		}
		return false
	})
	return at
}

// closed waits for the connection to close; it returns the close code
// and how long after from it closed.
func (lc *liveConn) closed(t *testing.T, from time.Time, timeout time.Duration) (int, time.Duration) {
	t.Helper()
	select {
	case <-lc.done:
	case <-time.After(timeout):
		t.Fatalf("the connection is still open %v later", timeout)
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.code, lc.closedAt.Sub(from)
}

func cookieHeader(b *browser) http.Header {
	u, _ := url.Parse(b.base)
	hdr := http.Header{}
	for _, ck := range b.c.Jar.Cookies(u) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	return hdr
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// admin runs "gpuportal admin" on the server's data folder, as an
// operator on the machine would while the server runs.
func adminCLI(t *testing.T, data string, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"admin", "--data", data}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gpuportal admin %v: %v: %s", args, err, out)
	}
	return string(out)
}

var shownToken = regexp.MustCompile(`: ([0-9a-f]{64})\n`)

// TestLiveConnectionsFollowTheCredential keeps websockets open across
// logout, token revocation, expiry, a disabled account and a team change:
// the first four are closed (code 4401) within seconds, the last loses the
// topics of its old team and keeps the others.
func TestLiveConnectionsFollowTheCredential(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data := t.TempDir()
	srv := startServer(t, "--data", data, "--sim-gpus", "1x2x80")
	alice := newAPI(t, srv.URL, "alice", "dev")
	job := submit(t, alice, map[string]any{"name": "watched", "gpus": 1, "sim": map[string]any{"duration_s": 300}})
	alice.waitState(job, 30*time.Second, "running")
	jobTopic := fmt.Sprintf("job:%d", job)
	admin := newBrowser(t, srv.URL)
	admin.login("admin", "dev")
	adminAPI := newAPI(t, srv.URL, "admin", "dev")

	// Logout: lead's browser session.
	lead := newBrowser(t, srv.URL)
	lead.login("lead", "dev")
	ws := dialLive(t, srv.URL, cookieHeader(lead), "gpus", "team:vision")
	at := time.Now()
	if st, path, _ := lead.post("/logout", url.Values{"_csrf": {lead.csrf("/jobs")}}); st != http.StatusOK || path != "/login" {
		t.Fatalf("logout: %d at %s", st, path)
	}
	code, took := ws.closed(t, at, 10*time.Second)
	t.Logf("logout: socket closed %v later, code %d", took.Round(time.Millisecond), code)
	if code != 4401 {
		t.Errorf("after logout: close code %d, want 4401", code)
	}

	// Revocation: an admin revokes one of bob's tokens.
	bob := newAPI(t, srv.URL, "bob", "dev")
	ws = dialLive(t, srv.URL, bearer(bob.token), "gpus", "team:nlp")
	var toks []struct {
		ID int64 `json:"id"`
	}
	if st := adminAPI.do(http.MethodGet, "/api/v1/users/bob/tokens", nil, &toks); st != http.StatusOK || len(toks) == 0 {
		t.Fatalf("bob's tokens: %d %v", st, toks)
	}
	at = time.Now()
	for _, tk := range toks {
		if st := adminAPI.do(http.MethodDelete, fmt.Sprintf("/api/v1/users/bob/tokens/%d", tk.ID), nil, nil); st != http.StatusNoContent {
			t.Fatalf("revoke: %d", st)
		}
	}
	code, took = ws.closed(t, at, 10*time.Second)
	t.Logf("token revoked: socket closed %v later, code %d", took.Round(time.Millisecond), code)
	if code != 4401 {
		t.Errorf("after revocation: close code %d, want 4401", code)
	}

	// Expiry: a token made to last 4 seconds.
	m := shownToken.FindStringSubmatch(adminCLI(t, data, "create-token", "--name", "bob", "--label", "short", "--ttl", "4s"))
	if m == nil {
		t.Fatal("no token shown")
	}
	ws = dialLive(t, srv.URL, bearer(m[1]), "gpus")
	code, took = ws.closed(t, time.Now(), 15*time.Second)
	t.Logf("token expiry: socket closed %v after the dial, code %d", took.Round(time.Millisecond), code)
	if code != 4401 {
		t.Errorf("after expiry: close code %d, want 4401", code)
	}

	// Disable, from the command line on the server's machine: only the
	// periodic check can see it.
	adminCLI(t, data, "create-user", "--name", "dora", "--role", "researcher", "--team", "vision")
	m = shownToken.FindStringSubmatch(adminCLI(t, data, "create-token", "--name", "dora"))
	ws = dialLive(t, srv.URL, bearer(m[1]), "gpus", jobTopic)
	at = time.Now()
	adminCLI(t, data, "disable-user", "--name", "dora")
	code, took = ws.closed(t, at, 10*time.Second)
	t.Logf("account disabled (CLI): socket closed %v later, code %d", took.Round(time.Millisecond), code)
	if code != 4401 {
		t.Errorf("after disable: close code %d, want 4401", code)
	}

	// Team change, on the admin page: carol moves from vision to nlp.
	adminCLI(t, data, "create-user", "--name", "carol", "--role", "researcher", "--team", "vision")
	m = shownToken.FindStringSubmatch(adminCLI(t, data, "create-token", "--name", "carol"))
	ws = dialLive(t, srv.URL, bearer(m[1]), "gpus", "team:vision", jobTopic)
	at = time.Now()
	if st, _, body := admin.post("/admin/set-role", url.Values{"_csrf": {admin.csrf("/admin")}, "name": {"carol"},
		"role": {"researcher"}, "team": {"nlp"}}); st != http.StatusOK {
		t.Fatalf("set-role: %d %.300s", st, body)
	}
	for _, lost := range []string{"team:vision", jobTopic} {
		got := ws.await(t, 10*time.Second, lost+" unsubscribed", func(m wsMsg) bool {
			return m.Topic == lost && m.Type == "error" && strings.Contains(m.Error, "unsubscribed")
		})
		t.Logf("team change: %s unsubscribed %v later", lost, got.Sub(at).Round(time.Millisecond))
	}
	// The socket stays, with the topics carol may see: three gpus updates
	// come, and nothing of the topics she lost meanwhile.
	pruned := time.Now()
	gpusUpdates := func() int {
		n := 0
		for _, m := range ws.since(pruned) {
			if m.Topic == "gpus" {
				n++
			}
		}
		return n
	}
	eventually(t, 15*time.Second, "three gpus updates after the team change", func() bool { return gpusUpdates() >= 3 })
	for _, m := range ws.since(pruned) {
		switch m.Topic {
		case "team:vision", jobTopic:
			t.Errorf("after the team change: %s %s %.100s", m.Topic, m.Type, m.Data)
		}
	}
	select {
	case <-ws.done:
		t.Error("the team change closed the socket")
	default:
	}
}

// TestLoginRedirectStaysOnSite logs in, in headless Chromium, from login
// links whose next parameter leads off site as a browser reads it (TAB
// dropped, backslash as slash), and from one that stays on site.
func TestLoginRedirectStaysOnSite(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80")
	base, _ := url.Parse(srv.URL)
	for _, tc := range []struct{ next, want string }{
		{"%2F%09%2Fevil.example", "/jobs"},
		{"%2F%5Cevil.example", "/jobs"},
		{"%2F%2Fevil.example", "/jobs"},
		{"https%3A%2F%2Fevil.example%2F", "/jobs"},
		{"%2Fqueues", "/queues"},
	} {
		t.Run(tc.next, func(t *testing.T) {
			ctx := newTab(t)
			err := chromedp.Do(ctx,
				chromedp.Navigate(srv.URL+"/login?next="+tc.next),
				chromedp.WaitVisible(`input[name=username]`),
				chromedp.SendKeys(`input[name=username]`, "alice"),
				chromedp.SendKeys(`input[name=password]`, "dev"),
				chromedp.Submit(`input[name=password]`),
				chromedp.Sleep(time.Second),
				chromedp.WaitReady(`body`),
			)
			if err != nil {
				t.Fatalf("log in: %v", err)
			}
			loc, err := chromedp.Run(ctx, chromedp.Location())
			if err != nil {
				t.Fatalf("location: %v", err)
			}
			u, err := url.Parse(loc)
			if err != nil || u.Host != base.Host || u.Path != tc.want {
				t.Errorf("after login from next=%s the browser is at %s, want %s%s", tc.next, loc, srv.URL, tc.want)
			}
		})
	}
}

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip (127.0.0.2, 127.0.0.3: all of 127/8 is loopback on Linux).
// Its exchanges are checked against web/openapi.json, as every client's.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: contractTransport{
		next: &http.Transport{DialContext: d.DialContext}, servers: checkedServers}}
}

// basicToken asks for an API token with a name and password from c.
func basicToken(t *testing.T, c *http.Client, base, user, password string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/tokens", nil)
	req.SetBasicAuth(user, password)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestLoginThrottlePerAddress fails the admin's password from 127.0.0.2
// until that address is slowed down; the right password from 127.0.0.3
// still works at once, and so does another account from 127.0.0.2.
func TestLoginThrottlePerAddress(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80")
	attacker, admin := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	var codes []int
	for range 6 {
		st, _ := basicToken(t, attacker, srv.URL, "admin", "wrong")
		codes = append(codes, st)
	}
	st, retry := basicToken(t, attacker, srv.URL, "admin", "dev")
	t.Logf("from 127.0.0.2: %v, then the right password: %d (Retry-After %s)", codes, st, retry)
	if st != http.StatusTooManyRequests || retry == "" {
		t.Errorf("the right password from the failing address during its delay: %d (Retry-After %q), want 429", st, retry)
	}
	if st, _ := basicToken(t, admin, srv.URL, "admin", "dev"); st != http.StatusCreated {
		t.Errorf("the right password from 127.0.0.3: %d, want 201 (no lock-out from another address)", st)
	}
	if st, _ := basicToken(t, attacker, srv.URL, "alice", "dev"); st != http.StatusCreated {
		t.Errorf("another account from 127.0.0.2: %d, want 201", st)
	}
	// The login form alike, from the other address.
	b := newBrowser(t, srv.URL)
	b.c.Transport = clientFrom("127.0.0.3").Transport
	b.login("admin", "dev")
}

// TestConnectionFlood opens 2,100 connections from 127.0.0.2 and holds
// them, as slow clients that never finish their request, while another
// client on 127.0.0.3 measures /healthz and /login.
func TestConnectionFlood(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80")
	addr := strings.TrimPrefix(srv.URL, "http://")
	const flood = 2100
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	start := time.Now()
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			// Half a request: the server waits for the rest.
			_, _ = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow-%d: ", i)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	t.Logf("%d connections opened from 127.0.0.2 in %v", len(conns), time.Since(start).Round(time.Millisecond))

	other := clientFrom("127.0.0.3")
	var lat []time.Duration
	for i := range 20 {
		for _, path := range []string{"/healthz", "/login"} {
			t0 := time.Now()
			resp, err := other.Get(srv.URL + path)
			took := time.Since(t0)
			if err != nil {
				t.Fatalf("%s from 127.0.0.3 during the flood (round %d): %v after %v", path, i, err, took)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: status %d", path, resp.StatusCode)
			}
			lat = append(lat, took)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("/healthz and /login from 127.0.0.3 during the flood: %d requests, median %v, max %v",
		len(lat), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	if lat[len(lat)-1] > 5*time.Second {
		t.Errorf("slowest answer %v during the flood, want well under 5s", lat[len(lat)-1])
	}

	// How many of the flood's connections the server still holds: a
	// closed one reads EOF at once.
	open := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); isTimeout(err) {
			open++
		}
	}
	t.Logf("the server held %d of the flood's %d connections", open, len(conns))
	if open > 128 {
		t.Errorf("the server holds %d connections of one address, want at most 128", open)
	}
	if !strings.Contains(metricsText(t, srv.URL), "gpuportal_connections_refused_total") {
		t.Error("/metrics lacks gpuportal_connections_refused_total")
	}

	// One user's websockets are capped too.
	alice := newAPI(t, srv.URL, "alice", "dev")
	for range 16 {
		dialLive(t, srv.URL, bearer(alice.token), "jct")
	}
	_, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws?topics=jct", bearer(alice.token))
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("alice's 17th websocket: %v, want 429", err)
	}
}

// isTimeout reports whether err is a read deadline passing: the
// connection is open and silent.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestFullDisk fills the server's data disk (a tmpfs): readiness says
// why with 503, users read "cannot save right now", never "internal
// error", and once space is freed the server is ready again.
func TestFullDisk(t *testing.T) {
	data := smallDisk(t, 64)
	srv := startServer(t, "--data", data, "--sim-gpus", "1x2x80")
	alice := newAPI(t, srv.URL, "alice", "dev")
	b := newBrowser(t, srv.URL)
	b.login("alice", "dev")
	if resp, err := http.Get(srv.URL + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz before: %v %v", resp, err)
	}
	filler := fill(t, data)

	var body string
	eventually(t, 10*time.Second, "readyz to answer 503", func() bool {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		raw := make([]byte, 512)
		n, _ := resp.Body.Read(raw)
		body = string(raw[:n])
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	t.Logf("readyz on a full disk: %s", body)
	if !strings.Contains(body, "disk full") {
		t.Errorf("readyz does not say the disk is full: %s", body)
	}
	if _, health := b.get("/healthz"); !strings.Contains(health, `"ready":false`) {
		t.Errorf("healthz on a full disk: %s", health)
	}

	// Writes until one fails: each fails saying the server cannot save.
	failed := 0
	for i := range 200 {
		var out map[string]any
		st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": fmt.Sprintf("full-%d-%s", i, strings.Repeat("x", 100)),
			"gpus": 1, "sim": map[string]any{"duration_s": 1}}, &out)
		if st == http.StatusCreated {
			continue
		}
		if st != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(out["error"]), "cannot save right now") {
			t.Fatalf("submission on a full disk: %d %v", st, out)
		}
		failed++
		break
	}
	if failed == 0 {
		t.Fatal("200 submissions were saved on a full disk")
	}
	st, _, page := b.post("/login", url.Values{"_csrf": {b.csrf("/login")}, "username": {"bob"}, "password": {"dev"}})
	t.Logf("login on a full disk: %d %.120s", st, page)
	if st >= 500 && !strings.Contains(page, "cannot save right now") || strings.Contains(page, "internal error") {
		t.Errorf("login on a full disk: %d %.300s", st, page)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "readyz to answer 200 once space is freed", func() bool {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "after", "gpus": 1, "sim": map[string]any{"duration_s": 1}}, nil); st != http.StatusCreated {
		t.Errorf("submission once space is freed: %d", st)
	}
}

// TestRemoteOutputAfterTheAgentLeaves: a remote job's output stays on
// its page and in the API once its machine's agent is gone.
func TestRemoteOutputAfterTheAgentLeaves(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0")
	agent := startAgent(t, srv.URL, "remote-gone")
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "kept", "gpus": 1, "command": []string{"sh", "-c", "echo output kept by the server"}})
	alice.waitState(id, 30*time.Second, "succeeded")
	eventually(t, 10*time.Second, "the server's copy", func() bool {
		return strings.Contains(remoteOutput(data, "remote-gone", id), "output kept by the server")
	})
	agent.stop()
	waitGPUs(t, srv.URL, 0)
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/logs", srv.URL, id), nil)
	req.Header.Set("Authorization", "Bearer "+alice.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 256)
	n, _ := resp.Body.Read(raw)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw[:n]), "output kept by the server") {
		t.Errorf("logs with the agent gone: %d %q", resp.StatusCode, raw[:n])
	}
	if page := jobPage(t, srv.URL, id); !strings.Contains(page, "output kept by the server") {
		t.Error("the job page lacks the output once the agent is gone")
	}
}

// TestDisabledAccount: an admin disables alice on the admin page; her
// token and session stop at once, her waiting job is held saying why
// (not lost), and enabling her releases it.
func TestDisabledAccount(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80", "--policy", "fifo")
	alice := newAPI(t, srv.URL, "alice", "dev")
	aliceBrowser := newBrowser(t, srv.URL)
	aliceBrowser.login("alice", "dev")
	running := submit(t, alice, map[string]any{"name": "holds-the-gpu", "gpus": 1, "sim": map[string]any{"duration_s": 600}})
	alice.waitState(running, 30*time.Second, "running")
	waiting := submit(t, alice, map[string]any{"name": "waits", "gpus": 1, "sim": map[string]any{"duration_s": 1}})

	admin := newBrowser(t, srv.URL)
	admin.login("admin", "dev")
	st, _, page := admin.post("/admin/disable-user", url.Values{"_csrf": {admin.csrf("/admin")}, "name": {"alice"}})
	if st != http.StatusOK || !strings.Contains(page, "alice is disabled") {
		t.Fatalf("disable on the admin page: %d %.300s", st, page)
	}
	if st := alice.do(http.MethodGet, "/api/v1/me", nil, nil); st != http.StatusUnauthorized {
		t.Errorf("alice's token after disable: %d, want 401", st)
	}
	if st, path := getFinal(aliceBrowser, "/jobs"); st != http.StatusOK || path != "/login" {
		t.Errorf("alice's session after disable: %d at %s, want the login page", st, path)
	}
	if st, _, page := aliceBrowser.post("/login", url.Values{"_csrf": {aliceBrowser.csrf("/login")}, "username": {"alice"}, "password": {"dev"}}); st != http.StatusForbidden || !strings.Contains(page, "disabled") {
		t.Errorf("alice logs in while disabled: %d %.200s", st, page)
	}
	adminAPI := newAPI(t, srv.URL, "admin", "dev")
	var j struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
		Held   bool   `json:"held"`
	}
	adminAPI.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", waiting), nil, &j)
	t.Logf("alice's waiting job once she is disabled: %+v", j)
	if !j.Held || j.State != "queued" || !strings.Contains(j.Reason, "disabled by admin") {
		t.Errorf("waiting job of a disabled user: %+v, want held, saying why", j)
	}
	// The GPU frees; the held job still does not start.
	if st := adminAPI.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", running), nil, nil); st != http.StatusOK {
		t.Fatalf("cancel the running job: %d", st)
	}
	adminAPI.waitState(running, 30*time.Second, "cancelled")
	afterPasses(t, srv.URL, 3)
	adminAPI.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", waiting), nil, &j)
	if j.State != "queued" {
		t.Errorf("a held job is %s with a free GPU", j.State)
	}
	var change struct {
		ReleasedJobs int `json:"released_jobs"`
	}
	if st := adminAPI.do(http.MethodPost, "/api/v1/users/alice/enable", nil, &change); st != http.StatusOK || change.ReleasedJobs != 1 {
		t.Fatalf("enable: %d %+v", st, change)
	}
	adminAPI.waitState(waiting, 30*time.Second, "succeeded")
}

// getFinal fetches path following redirects and returns the status and
// the final path.
func getFinal(b *browser, path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Request.URL.Path
}
