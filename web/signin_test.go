package web

import (
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/identity"
)

// signInConfig is the identity configuration of serve's flags args.
func signInConfig(t *testing.T, args ...string) identity.Config {
	t.Helper()
	var f identity.Flags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	c, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSignInWhileSourcesAreDown: with the directory and the provider
// unreachable, their people are told so (503, not counted as failed
// logins), while local accounts, the break-glass admin's among them,
// still sign in; the login page offers both ways; a callback this browser
// did not begin is refused.
func TestSignInWhileSourcesAreDown(t *testing.T) {
	t.Parallel()
	cfg := signInConfig(t, "--ldap-url", "ldap://127.0.0.1:1", "--ldap-insecure", "--ldap-user-base", "ou=people,dc=lab,dc=example",
		"--ldap-timeout", "2s", "--auth-default-team", "vision", "--oidc-issuer", "http://127.0.0.1:1", "--oidc-client-id", "gpuportal",
		"--oidc-redirect-url", "http://127.0.0.1:8080/login/oidc/callback", "--oidc-name", "Lab SSO")
	ts := newTestServer(t, func(c *testConfig) { c.SignIn = cfg })
	for _, tc := range []struct {
		name, method, target, body string
		want                       int
		wantBody                   string
	}{
		{"the login page offers both", "GET", "/login", "", http.StatusOK, "Sign in with Lab SSO"},
		{"a directory account", "POST", "/login", "username=dave&password=dave-secret", http.StatusServiceUnavailable, "The directory cannot be reached now"},
		{"the break-glass admin", "POST", "/login", "username=admin&password=password1", http.StatusSeeOther, ""},
		{"a local account, wrong password", "POST", "/login", "username=alice&password=nope", http.StatusUnauthorized, "Wrong user name or password"},
		{"the provider", "GET", "/login/oidc?next=/jobs&host=1", "", http.StatusServiceUnavailable, "Lab SSO cannot be reached now"},
		{"a callback not begun here", "GET", "/login/oidc/callback?code=c&state=s", "", http.StatusBadRequest, "not started here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, "anonymous", tc.method, tc.target, tc.body)
			if rec.Code != tc.want || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("status %d, want %d with %q; body %.300s", rec.Code, tc.want, tc.wantBody, rec.Body.String())
			}
		})
	}
	// A sign-in begun on a host other than the callback's (here the test
	// request's) goes there first, so that its cookie is where the
	// provider sends the browser back; once.
	rec := ts.do(t, "anonymous", "GET", "/login/oidc?next=/jobs", "")
	if want := "http://127.0.0.1:8080/login/oidc?host=1&next=%2Fjobs"; rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != want {
		t.Errorf("sign-in begun on another host: status %d to %q, want 303 to %s", rec.Code, rec.Header().Get("Location"), want)
	}
	// An unreachable directory is no failed login: no throttle.
	for range 12 {
		if rec := ts.do(t, "anonymous", "POST", "/login", "username=dave&password=x"); rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("directory down: status %d, want 503 each time", rec.Code)
		}
	}
}
