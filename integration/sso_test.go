package integration

import (
	"bufio"
	"bytes"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-ldap/ldap/v3"

	"github.com/gpuportal/gpuportal/internal/testldap"
)

// ldapArgs are serve's flags for the lab directory of testdata/ldap,
// reached with StartTLS and the lab's CA, searched as the service account.
func ldapArgs(t *testing.T, dir *testldap.Server) []string {
	pw := filepath.Join(t.TempDir(), "ldap-password")
	if err := os.WriteFile(pw, []byte(testldap.ServicePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--ldap-url", dir.URL, "--ldap-start-tls", "--ldap-ca-file", dir.CAFile,
		"--ldap-bind-dn", testldap.ServiceDN, "--ldap-bind-password-file", pw,
		"--ldap-user-base", "ou=people," + testldap.Base, "--ldap-group-base", "ou=groups," + testldap.Base,
		"--auth-map", "group:ml-vision -> team vision", "--auth-map", "group:ml-nlp -> team nlp",
		"--auth-map", "group:vision-leads -> lead", "--auth-map", "group:gpu-admins -> admin"}
}

// whoOnPage is the account line of a portal page: "dave · researcher · vision".
func whoOnPage(body string) string {
	_, rest, ok := strings.Cut(body, `<span class="who">`)
	if !ok {
		return ""
	}
	who, _, _ := strings.Cut(rest, "</span>")
	return strings.Join(strings.Fields(who), " ")
}

// TestLDAPSignIn runs the portal against a real slapd: people sign in with
// their directory password (wrong ones refused), get the team and role of
// their groups, accounts are made at first sign-in with their source and
// Unix account recorded; someone in no mapped group is refused; a group
// change in the directory moves the team at the next sign-in; the local
// break-glass admin still signs in; API tokens come from the directory
// password too.
func TestLDAPSignIn(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	dir := testldap.Start(t, "../testdata/ldap/lab.ldif")
	srv := startServer(t, append([]string{"--data", t.TempDir(), "--sim-gpus", "1x1x80", "--dev-token", "admintok"}, ldapArgs(t, dir)...)...)

	b := newBrowser(t, srv.URL)
	status, path, body := b.post("/login", url.Values{"_csrf": {b.csrf("/login")}, "username": {"dave"}, "password": {"erin-secret"}})
	if status != http.StatusUnauthorized || path != "/login" || !strings.Contains(body, "Wrong user name or password") {
		t.Fatalf("wrong password: status %d at %s", status, path)
	}
	if !strings.Contains(body, "lab account") {
		t.Errorf("the login page does not say that passwords are the lab's")
	}
	b.login("dave", "dave-secret")
	if _, body := b.get("/jobs"); whoOnPage(body) != "dave · researcher · vision" {
		t.Errorf("dave after sign-in: %q, want researcher of vision", whoOnPage(body))
	}
	erin := newBrowser(t, srv.URL)
	erin.login("erin", "erin-secret")
	if _, body := erin.get("/jobs"); whoOnPage(body) != "erin · lead · vision" {
		t.Errorf("erin: %q, want lead of vision (first team rule, strongest role)", whoOnPage(body))
	}
	frank := newAPI(t, srv.URL, "frank", "frank-secret") // a token from the directory password
	var me map[string]string
	if frank.do("GET", "/api/v1/me", nil, &me); me["role"] != "admin" || me["source"] != "ldap" || me["unix_name"] != "frank" {
		t.Errorf("frank: %v, want an admin from ldap with Unix account frank", me)
	}
	gina := newBrowser(t, srv.URL)
	status, _, body = gina.post("/login", url.Values{"_csrf": {gina.csrf("/login")}, "username": {"gina"}, "password": {"gina-secret"}})
	if status != http.StatusForbidden || !strings.Contains(body, "None of your groups gives you a team") {
		t.Errorf("gina, in no mapped group: status %d", status)
	}
	admin := newBrowser(t, srv.URL)
	admin.login("admin", "dev") // the local break-glass admin

	var users []struct {
		Name, Team, Role, Source string
		UnixName                 string `json:"unix_name"`
	}
	root := &api{t: t, base: srv.URL, token: "admintok"}
	root.do("GET", "/api/v1/users", nil, &users)
	got := map[string]string{}
	for _, u := range users {
		got[u.Name] = u.Source + " " + u.UnixName
	}
	if got["dave"] != "ldap dave" || got["erin"] != "ldap erin" || got["admin"] != "local admin" || got["gina"] != "" {
		t.Errorf("accounts: %v", got)
	}

	// dave's open page follows his team live.
	ws := dialLive(t, srv.URL, cookieHeader(b), "team:vision")

	// dave moves from ml-vision to ml-nlp in the directory.
	conn, err := ldap.DialURL(dir.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Bind(testldap.Admin, testldap.AdminPassword); err != nil {
		t.Fatal(err)
	}
	del := ldap.NewModifyRequest("cn=ml-vision,ou=groups,"+testldap.Base, nil)
	del.Delete("member", []string{"uid=dave,ou=people," + testldap.Base})
	add := ldap.NewModifyRequest("cn=ml-nlp,ou=groups,"+testldap.Base, nil)
	add.Add("memberUid", []string{"dave"})
	for _, m := range []*ldap.ModifyRequest{del, add} {
		if err := conn.Modify(m); err != nil {
			t.Fatal(err)
		}
	}
	again := newBrowser(t, srv.URL)
	again.login("dave", "dave-secret")
	for _, c := range []*browser{again, b} { // the new session, and the one before the change
		if _, body := c.get("/jobs"); whoOnPage(body) != "dave · researcher · nlp" {
			t.Errorf("dave after the group change: %q, want researcher of nlp", whoOnPage(body))
		}
	}
	// His connection opened before the change loses the old team's topic
	// at once.
	ws.await(t, 10*time.Second, "team:vision unsubscribed", func(m wsMsg) bool {
		return m.Topic == "team:vision" && m.Type == "error" && strings.Contains(m.Error, "unsubscribed")
	})
	// The admin page's audit log says who changed dave's team, and how.
	if _, body := admin.get("/admin"); !strings.Contains(body, "user.sync") || !strings.Contains(body, "sign-in:ldap") ||
		!strings.Contains(body, "team &#34;vision&#34; -&gt; &#34;nlp&#34;") {
		t.Errorf("the admin page's audit log does not show dave's team change")
	}
}

// idpLog is what the test provider logged: a line per request.
type idpLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *idpLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *idpLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startIDP runs internal/testidp/cmd/testidp, an OpenID Connect provider on
// zitadel/oidc, for the portal at portal, and returns its issuer and log.
func startIDP(t *testing.T, portal string) (string, *idpLog) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testidp")
	if out, err := exec.Command("go", "build", "-o", bin, "../internal/testidp/cmd/testidp").CombinedOutput(); err != nil {
		t.Fatalf("build testidp: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--users", "../testdata/oidc/users.json", "--client-id", "gpuportal", "--client-secret", "idp-secret",
		"--redirect-uri", portal+"/login/oidc/callback", "--post-logout-uri", portal+"/login")
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
	issuer, ok := strings.CutPrefix(strings.TrimSpace(line), "testidp issuer ")
	if err != nil || !ok {
		t.Fatalf("testidp: %q, %v\n%s", line, err, log)
	}
	return issuer, log
}

// TestOIDCSignInBrowser: alice opens her jobs in Chromium, is sent to the
// login page, signs in with the lab's provider (a real OpenID Connect
// provider in its own process: discovery, code flow with PKCE, ID token,
// userinfo), and lands on her jobs with the team of her group and the
// Unix account of her claim; her local account of the same name is taken
// over (--auth-link-local). Logging out ends her session at the provider
// too (RP-initiated logout) and brings her back to the login page; hugo,
// in no mapped group, is told why he cannot sign in. The login page fits
// 1440 and 390 px.
func TestOIDCSignInBrowser(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	ctx := newTab(t)
	addr := freeAddr(t)
	portal := "http://" + addr
	issuer, idp := startIDP(t, portal)
	secret := filepath.Join(t.TempDir(), "oidc-secret")
	if err := os.WriteFile(secret, []byte("idp-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80", "--addr", addr, "--dev-token", "admintok",
		"--oidc-issuer", issuer, "--oidc-client-id", "gpuportal", "--oidc-client-secret-file", secret,
		"--oidc-redirect-url", portal+"/login/oidc/callback", "--oidc-name", "Lab SSO", "--oidc-unix-claim", "unix_name",
		"--auth-map", "group:ml-speech -> team speech", "--auth-link-local")

	err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/jobs"),
		chromedp.WaitVisible(`#sso`),
	)
	if err != nil {
		t.Fatalf("login page: %v\n%s", err, srv.output())
	}
	for _, w := range []int64{1440, 390} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900)); err != nil {
			t.Fatal(err)
		}
		scroll, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
		if err != nil {
			t.Fatal(err)
		}
		if scroll > w {
			t.Errorf("login page is %d px wide at %d px", scroll, w)
		}
		screenshot(t, ctx, "login-sso-"+strconv.FormatInt(w, 10))
	}
	err = chromedp.Do(ctx,
		chromedp.Click(`#sso`),
		chromedp.WaitVisible(`#username`),
		chromedp.SendKeys(`#username`, "alice"),
		chromedp.SendKeys(`#password`, "alice-secret"),
		chromedp.Submit(`#password`),
		chromedp.WaitVisible(`#jobs`),
	)
	if err != nil {
		t.Fatalf("sign in through the provider: %v\n%s", err, srv.output())
	}
	screenshot(t, ctx, "jobs-after-sso")
	who, err := chromedp.Run(ctx, chromedp.Text(`.who`))
	if err != nil {
		t.Fatal(err)
	}
	at, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(at); u == nil || u.Host != addr || u.Path != "/jobs" {
		t.Errorf("landed on %s, want the portal's /jobs", at)
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
	for _, u := range users {
		if u.Name == "alice" && (u.Source != "oidc" || u.UnixName != "asmith" || u.Team != "speech") {
			t.Errorf("alice's account: %+v, want oidc, Unix account asmith, team speech", u)
		}
	}
	// Her password no longer opens the account: it signs in through the provider.
	if status, _ := basicToken(t, http.DefaultClient, srv.URL, "alice", "dev"); status != http.StatusUnauthorized {
		t.Errorf("alice's old local password: status %d, want 401", status)
	}

	err = chromedp.Do(ctx,
		chromedp.Click(`.account button[type=submit]`),
		chromedp.WaitVisible(`#sso`),
	)
	if err != nil {
		t.Fatalf("log out: %v", err)
	}
	if at, err = chromedp.Run(ctx, chromedp.Location()); err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(at); u == nil || u.Host != addr || u.Path != "/login" {
		t.Errorf("after logout at %s, want the portal's /login", at)
	}
	for _, path := range []string{"/.well-known/openid-configuration", "/auth", "/oauth/token", "/keys", "/userinfo", "/end_session"} {
		if !strings.Contains(idp.String(), "path="+path+" ") {
			t.Errorf("the provider never served %s:\n%s", path, idp)
		}
	}
	// hugo's groups give no team: the login page says so.
	err = chromedp.Do(ctx,
		chromedp.Click(`#sso`),
		chromedp.WaitVisible(`#username`),
		chromedp.SendKeys(`#username`, "hugo"),
		chromedp.SendKeys(`#password`, "hugo-secret"),
		chromedp.Submit(`#password`),
		chromedp.WaitVisible(`#sso`),
	)
	if err != nil {
		t.Fatalf("hugo signs in: %v", err)
	}
	if flash, err := chromedp.Run(ctx, chromedp.Text(`body`)); err != nil || !strings.Contains(flash, "None of your groups gives you a team") {
		t.Errorf("hugo, in no mapped group, is told %q (%v)", flash, err)
	}
	// A callback that this browser did not begin is refused.
	b := newBrowser(t, srv.URL)
	if status, body := b.get("/login/oidc/callback?code=x&state=y"); status != http.StatusBadRequest || !strings.Contains(body, "not started here") {
		t.Errorf("forged callback: status %d", status)
	}
}

// TestLDAPDirectorySync: with --ldap-sync-interval, accounts follow the
// directory between sign-ins: erin, taken out of the vision groups, is a
// researcher of nlp on her open page without signing in again; frank,
// taken out of every mapped group, loses his session and API token; an
// entry deleted from the directory loses its access too.
func TestLDAPDirectorySync(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	dir := testldap.Start(t, "../testdata/ldap/lab.ldif")
	srv := startServer(t, append([]string{"--data", t.TempDir(), "--sim-gpus", "1x1x80", "--ldap-sync-interval", "1s"}, ldapArgs(t, dir)...)...)
	erin := newBrowser(t, srv.URL)
	erin.login("erin", "erin-secret")
	frank := newBrowser(t, srv.URL)
	frank.login("frank", "frank-secret")
	frankAPI := newAPI(t, srv.URL, "frank", "frank-secret")
	dave := newAPI(t, srv.URL, "dave", "dave-secret")

	conn, err := ldap.DialURL(dir.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Bind(testldap.Admin, testldap.AdminPassword); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"ml-vision", "vision-leads", "gpu-admins"} {
		who := "uid=erin,ou=people," + testldap.Base
		if g == "gpu-admins" {
			who = "uid=frank,ou=people," + testldap.Base
		}
		if g != "ml-vision" {
			// A groupOfNames needs a member: dave takes the place.
			add := ldap.NewModifyRequest("cn="+g+",ou=groups,"+testldap.Base, nil)
			add.Add("member", []string{"uid=dave,ou=people," + testldap.Base})
			if err := conn.Modify(add); err != nil {
				t.Fatal(err)
			}
		}
		m := ldap.NewModifyRequest("cn="+g+",ou=groups,"+testldap.Base, nil)
		m.Delete("member", []string{who})
		if err := conn.Modify(m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "erin a researcher of nlp without signing in", func() bool {
		_, body := erin.get("/jobs")
		return whoOnPage(body) == "erin · researcher · nlp"
	})
	eventually(t, 10*time.Second, "frank's session and token ended", func() bool {
		var me map[string]string
		return landsOn(t, frank, "/jobs") == "/login" && frankAPI.do("GET", "/api/v1/me", nil, &me) == http.StatusUnauthorized
	})
	eventually(t, 10*time.Second, "dave an admin without signing in", func() bool {
		var me map[string]string
		dave.do("GET", "/api/v1/me", nil, &me)
		return me["role"] == "admin"
	})
	if err := conn.Del(ldap.NewDelRequest("uid=erin,ou=people,"+testldap.Base, nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "erin, gone from the directory, logged out", func() bool {
		return landsOn(t, erin, "/jobs") == "/login"
	})
	if !strings.Contains(srv.output(), "gone from the directory") {
		t.Errorf("the end of erin's access is not logged")
	}
}

// landsOn is the path where b ends up after following redirects from path.
func landsOn(t *testing.T, b *browser, path string) string {
	t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.Request.URL.Path
}
