package integration

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The portal signs in through node-oidc-provider, an OpenID Certified
// provider, run as its own process and configured as a lab would
// (testdata/oidc-provider/lab.mjs): a confidential client with PKCE
// required, the ID token with only what it must carry (names and groups
// at userinfo), a login page of the lab's, RP-initiated logout with its
// confirmation page. Dex was the first choice, but no current Dex builds
// from the Go module proxy: `go install github.com/dexidp/dex/cmd/dex@latest`
// resolves to v2.13.0+incompatible (2018), since Dex's module path has no
// /v2 while its tags are v2.x, and its go.mod replaces a module of its
// own, which `go install pkg@version` refuses (docs/operations.md tells
// how to run Dex from its release images).

// labOIDCDir returns a folder holding node_modules with the packages of
// testdata/oidc-provider/package-lock.json, installed once with `npm ci`
// into the user's cache (…/gpuportal-test/oidc-provider-HASH) and reused
// while the lock file is the same. Without Node.js or npm, or when the
// install fails, the test fails under CI=true and is skipped (saying why)
// elsewhere.
func labOIDCDir(t *testing.T) string {
	t.Helper()
	need := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			need("no %s: the OpenID Connect provider test runs node-oidc-provider (apt-get install -y nodejs npm)", tool)
		}
	}
	lock, err := os.ReadFile("../testdata/oidc-provider/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(lock)
	dir := filepath.Join(cache, "gpuportal-test", "oidc-provider-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider", "package.json")); err == nil {
		return dir
	}
	// Installed beside, then renamed: a test that stops half way leaves
	// no half-installed folder, and two tests at once both end up with
	// a whole one.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "installing-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join("../testdata/oidc-provider", f))
		if err == nil {
			err = os.WriteFile(filepath.Join(tmp, f), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	npm := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--omit=dev")
	npm.Dir = tmp
	if out, err := npm.CombinedOutput(); err != nil {
		need("npm ci of testdata/oidc-provider: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider", "package.json")); serr != nil {
			t.Fatalf("install oidc-provider into %s: %v", dir, err)
		}
	}
	return dir
}

// startLabOIDC runs testdata/oidc-provider/lab.mjs for the portal at
// portal (client gpuportal, secret idp-secret, the people of
// testdata/oidc/users.json), and returns its issuer and its log (a line
// per request: "method=GET path=/auth status=303").
func startLabOIDC(t *testing.T, portal string) (string, *idpLog) {
	t.Helper()
	modules := labOIDCDir(t)
	// The script runs beside the installed packages, where Node.js
	// resolves its import of oidc-provider.
	run := t.TempDir()
	script, err := os.ReadFile("../testdata/oidc-provider/lab.mjs")
	if err == nil {
		err = os.WriteFile(filepath.Join(run, "lab.mjs"), script, 0o644)
	}
	if err == nil {
		err = os.Symlink(filepath.Join(modules, "node_modules"), filepath.Join(run, "node_modules"))
	}
	if err != nil {
		t.Fatal(err)
	}
	users, err := filepath.Abs("../testdata/oidc/users.json")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(run, "lab.mjs"), "--users", users, "--client-id", "gpuportal",
		"--client-secret", "idp-secret", "--redirect-uri", portal+"/login/oidc/callback", "--post-logout-uri", portal+"/login")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	log := &idpLog{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	issuer, ok := strings.CutPrefix(strings.TrimSpace(line), "oidc-provider issuer ")
	if err != nil || !ok {
		t.Fatalf("oidc-provider: %q, %v\n%s", line, err, log)
	}
	return issuer, log
}

// startLabPortal runs the portal on addr signing in through issuer, with
// group ml-speech mapped to team speech.
func startLabPortal(t *testing.T, addr, issuer string) *server {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "oidc-secret")
	if err := os.WriteFile(secret, []byte("idp-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80", "--addr", addr, "--dev-token", "admintok",
		"--oidc-issuer", issuer, "--oidc-client-id", "gpuportal", "--oidc-client-secret-file", secret,
		"--oidc-redirect-url", "http://"+addr+"/login/oidc/callback", "--oidc-name", "Lab SSO", "--oidc-unix-claim", "unix_name",
		"--auth-map", "group:ml-speech -> team speech", "--auth-map", "group:staff -> researcher",
		"--auth-link-local") // alice, a demo account of serve --dev, is taken over by her sign-in at the provider
}

// TestOIDCLabProviderBrowser: in Chromium, alice opens her jobs at
// localhost (the callback is registered at 127.0.0.1), is sent to the
// login page, picks the lab's sign-in, mistypes her password at the
// provider (told so there), signs in, and lands on her jobs as a
// researcher of speech (her group ml-speech, read at userinfo) with the
// Unix account of her claim. Logging out here takes her to the
// provider's confirmation and back to the portal's login page, and her
// session at the provider is over: signing in again asks for her
// password. hugo, in no mapped team, is told why. Two tabs that each
// began a sign-in (an expired session seen in both) both complete.
func TestOIDCLabProviderBrowser(t *testing.T) {
	t.Parallel() // waits on the binary, Node.js and Chromium
	ctx := newTabFor(t, 2*time.Minute)
	addr := freeAddr(t)
	portal := "http://" + addr
	issuer, idp := startLabOIDC(t, portal)
	srv := startLabPortal(t, addr, issuer)

	// She types localhost; the callback is registered at 127.0.0.1.
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.Navigate("http://localhost:"+port+"/jobs"),
		chromedp.WaitVisible(`#sso`),
		chromedp.Click(`#sso`),
		chromedp.WaitVisible(`#username`),
		chromedp.SendKeys(`#username`, "alice"),
		chromedp.SendKeys(`#password`, "wrong"),
		chromedp.Submit(`#password`),
		chromedp.WaitVisible(`#error`),
	)
	if err != nil {
		t.Fatalf("to the provider's login page: %v\n%s\n%s", err, srv.output(), idp)
	}
	if msg, err := chromedp.Run(ctx, chromedp.Text(`#error`)); err != nil || !strings.Contains(msg, "Wrong user name or password") {
		t.Errorf("wrong password at the provider: %q (%v)", msg, err)
	}
	err = chromedp.Do(ctx,
		chromedp.SendKeys(`#username`, "alice"),
		chromedp.SendKeys(`#password`, "alice-secret"),
		chromedp.Submit(`#password`),
		chromedp.WaitVisible(`#jobs`),
	)
	if err != nil {
		t.Fatalf("sign in through the provider: %v\n%s\n%s", err, srv.output(), idp)
	}
	screenshot(t, ctx, "jobs-after-oidc-provider")
	at, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(at); u == nil || u.Host != addr || u.Path != "/jobs" {
		t.Errorf("landed on %s, want the portal's /jobs", at)
	}
	who, err := chromedp.Run(ctx, chromedp.Text(`.who`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(who), " "); got != "alice · researcher · speech" {
		t.Errorf("alice after sign-in: %q, want researcher of speech (group ml-speech)", got)
	}
	root := &api{t: t, base: srv.URL, token: "admintok"}
	var users []struct {
		Name, Team, Source string
		UnixName           string `json:"unix_name"`
	}
	root.do("GET", "/api/v1/users", nil, &users)
	found := false
	for _, u := range users {
		if u.Name == "alice" {
			found = true
			if u.Source != "oidc" || u.UnixName != "asmith" || u.Team != "speech" {
				t.Errorf("alice's account: %+v, want oidc, Unix account asmith, team speech", u)
			}
		}
	}
	if !found {
		t.Errorf("no account for alice: %+v", users)
	}

	// Logging out ends her session at the provider too: it asks, she
	// confirms, and she is back on the portal's login page.
	err = chromedp.Do(ctx,
		chromedp.Click(`.account button[type=submit]`),
		chromedp.WaitVisible(`button[value=yes]`),
		chromedp.Click(`button[value=yes]`),
		chromedp.WaitVisible(`#sso`),
	)
	if err != nil {
		t.Fatalf("log out: %v\n%s", err, idp)
	}
	if at, err = chromedp.Run(ctx, chromedp.Location()); err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(at); u == nil || u.Host != addr || u.Path != "/login" {
		t.Errorf("after logout at %s, want the portal's /login", at)
	}
	if status, _ := newBrowser(t, srv.URL).get("/jobs"); status != http.StatusOK {
		t.Fatalf("GET /jobs: %d", status)
	}
	// Signed out at the provider: the next sign-in asks for a password.
	// hugo signs in; his groups give no team, and the login page says so.
	err = chromedp.Do(ctx,
		chromedp.Click(`#sso`),
		chromedp.WaitVisible(`#username`),
		chromedp.SendKeys(`#username`, "hugo"),
		chromedp.SendKeys(`#password`, "hugo-secret"),
		chromedp.Submit(`#password`),
		chromedp.WaitVisible(`#sso`),
	)
	if err != nil {
		t.Fatalf("hugo signs in: %v\n%s", err, idp)
	}
	if body, err := chromedp.Run(ctx, chromedp.Text(`body`)); err != nil || !strings.Contains(body, "None of your groups gives you a team") {
		t.Errorf("hugo, in no mapped group, is told %q (%v)", body, err)
	}
	for _, path := range []string{"/.well-known/openid-configuration", "/auth", "/token", "/jwks", "/me", "/session/end", "/session/end/confirm"} {
		if !strings.Contains(idp.String(), "path="+path+" ") {
			t.Errorf("the provider never served %s:\n%s", path, idp)
		}
	}
}

// oidcClient is a browser over HTTP that stops at each redirect, so that
// a test can look at (and change) what goes between the portal and the
// provider. Its cookies are kept per host, as a browser's are.
type oidcClient struct {
	t *testing.T
	c *http.Client
}

func newOIDCClient(t *testing.T) *oidcClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &oidcClient{t: t, c: &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: localhostTransport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (o *oidcClient) do(req *http.Request) (*http.Response, string) {
	o.t.Helper()
	resp, err := o.c.Do(req)
	if err != nil {
		o.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (o *oidcClient) get(u string) (*http.Response, string) {
	o.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		o.t.Fatal(err)
	}
	return o.do(req)
}

// start begins a sign-in at the portal and returns the provider's
// authorization URL it was sent to (through the portal's own redirects).
func (o *oidcClient) start(portal string) *url.URL {
	o.t.Helper()
	at := portal + "/login/oidc?next=/jobs"
	for range 3 {
		resp, body := o.get(at)
		to, err := resp.Location()
		if resp.StatusCode != http.StatusSeeOther || err != nil {
			o.t.Fatalf("start at %s: status %d, %v\n%s", at, resp.StatusCode, err, body)
		}
		if to.Path != "/login/oidc" {
			return to
		}
		at = to.String()
	}
	o.t.Fatalf("start at %s: the portal keeps redirecting to itself", portal)
	return nil
}

var loginAction = regexp.MustCompile(`<form method="post" action="([^"]+)"`)

// signIn follows auth through the provider's login page as user and
// returns the portal's callback URL the provider sends the browser to.
func (o *oidcClient) signIn(auth *url.URL, user, password string) *url.URL {
	o.t.Helper()
	next := auth
	for range 10 {
		if next.Path == "/login/oidc/callback" {
			return next
		}
		resp, body := o.get(next.String())
		switch {
		case resp.StatusCode == http.StatusOK && loginAction.MatchString(body):
			action, err := next.Parse(loginAction.FindStringSubmatch(body)[1])
			if err != nil {
				o.t.Fatal(err)
			}
			req, err := http.NewRequest(http.MethodPost, action.String(),
				strings.NewReader(url.Values{"username": {user}, "password": {password}}.Encode()))
			if err != nil {
				o.t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, body = o.do(req)
			if resp.StatusCode != http.StatusSeeOther {
				o.t.Fatalf("sign in as %s at the provider: status %d\n%s", user, resp.StatusCode, body)
			}
		case resp.StatusCode/100 != 3:
			o.t.Fatalf("GET %s: status %d\n%s", next, resp.StatusCode, body)
		}
		loc, err := resp.Location()
		if err != nil {
			o.t.Fatal(err)
		}
		next = loc
	}
	o.t.Fatalf("no callback after 10 redirects from %s", auth)
	return nil
}

// TestOIDCLabProviderRefusesForgedCallbacks: what reaches the callback
// other than the end of the sign-in this browser began is refused, with
// a real provider on the other end: a wrong state; a nonce changed on
// the way to the provider (the ID token then carries another nonce); a
// callback replayed after use, with or without the flow's cookie (the
// provider will not take a code twice); a code of one sign-in brought
// to another's state (PKCE). An honest sign-in over the same path works,
// and so do two sign-ins begun at once in one browser (two tabs).
func TestOIDCLabProviderRefusesForgedCallbacks(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	portal := "http://" + addr
	issuer, idp := startLabOIDC(t, portal)
	srv := startLabPortal(t, addr, issuer)

	refused := func(o *oidcClient, cb *url.URL, why, logged string) {
		t.Helper()
		resp, body := o.get(cb.String())
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "did not complete") && !strings.Contains(body, "not started here") {
			t.Errorf("%s: status %d\n%s", why, resp.StatusCode, body)
		}
		if resp.Header.Get("Set-Cookie") != "" && strings.Contains(resp.Header.Get("Set-Cookie"), "gpuportal_session=") &&
			!strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
			t.Errorf("%s: a session was started", why)
		}
		if logged != "" {
			eventually(t, 5*time.Second, why+" logged", func() bool { return strings.Contains(srv.output(), logged) })
		}
	}
	signedIn := func(o *oidcClient, cb *url.URL, why string) {
		t.Helper()
		resp, body := o.get(cb.String())
		if to, _ := resp.Location(); resp.StatusCode != http.StatusSeeOther || to == nil || to.Path != "/jobs" {
			t.Fatalf("%s: status %d, to %v\n%s\n%s", why, resp.StatusCode, to, body, srv.output())
		}
		resp, body = o.get(portal + "/jobs")
		if resp.StatusCode != http.StatusOK || !strings.Contains(whoOnPage(body), "speech") {
			t.Errorf("%s: /jobs %d as %q", why, resp.StatusCode, whoOnPage(body))
		}
	}

	// A state other than the one this browser began with.
	o := newOIDCClient(t)
	cb := o.signIn(o.start(portal), "alice", "alice-secret")
	forged := *cb
	q := forged.Query()
	q.Set("state", "forged-"+q.Get("state"))
	forged.RawQuery = q.Encode()
	refused(o, &forged, "wrong state", "")

	// The nonce changed on the way to the provider: state and PKCE hold,
	// the ID token's nonce does not.
	o = newOIDCClient(t)
	auth := o.start(portal)
	q = auth.Query()
	if q.Get("nonce") == "" || q.Get("code_challenge_method") != "S256" {
		t.Fatalf("the authorization request has no nonce or no S256 PKCE: %s", auth)
	}
	q.Set("nonce", "another-nonce")
	auth.RawQuery = q.Encode()
	refused(o, o.signIn(auth, "alice", "alice-secret"), "wrong nonce", "the ID token's nonce does not match")

	// An honest sign-in, then its callback replayed: without the flow's
	// cookie (gone at first use), and with it put back (the provider
	// refuses the code a second time).
	o = newOIDCClient(t)
	auth = o.start(portal)
	flowCookies := o.c.Jar.Cookies(&url.URL{Scheme: "http", Host: addr, Path: "/login/oidc/callback"})
	cb = o.signIn(auth, "alice", "alice-secret")
	signedIn(o, cb, "honest sign-in")
	refused(newOIDCClient(t), cb, "callback replayed in another browser", "")
	refused(o, cb, "callback replayed", "")
	o.c.Jar.SetCookies(&url.URL{Scheme: "http", Host: addr, Path: "/login/oidc/callback"}, flowCookies)
	refused(o, cb, "callback replayed with its cookie", "exchange the code")

	// bob's code brought to alice's browser under her own state: the
	// code was issued for another PKCE challenge.
	victim, attacker := newOIDCClient(t), newOIDCClient(t)
	victimAuth := victim.start(portal)
	theirs := attacker.signIn(attacker.start(portal), "alice", "alice-secret")
	mixed := *theirs
	q = mixed.Query()
	q.Set("state", victimAuth.Query().Get("state"))
	mixed.RawQuery = q.Encode()
	refused(victim, &mixed, "another sign-in's code", "")

	// A sign-in begun at localhost, while the callback is registered at
	// 127.0.0.1 (serve --dev prints the one, people type the other),
	// completes: the portal moves the browser to the callback's host
	// before it sets the flow's cookie.
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	o = newOIDCClient(t)
	signedIn(o, o.signIn(o.start("http://localhost:"+port), "alice", "alice-secret"), "a sign-in begun at localhost")

	// Two tabs of one browser each begin a sign-in (an expired session
	// seen in both), then finish in turn: both complete.
	o = newOIDCClient(t)
	first, second := o.start(portal), o.start(portal)
	cb2 := o.signIn(second, "alice", "alice-secret")
	cb1 := o.signIn(first, "alice", "alice-secret")
	signedIn(o, cb1, "the first tab's sign-in")
	signedIn(o, cb2, "the second tab's sign-in")
	if t.Failed() {
		t.Logf("provider:\n%s\nportal:\n%s", idp, srv.output())
	}
}
