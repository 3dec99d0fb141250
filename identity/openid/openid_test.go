package openid

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/identity"
	"github.com/gpuportal/gpuportal/internal/testidp"
)

const portal = "http://portal.test"

// startProvider runs the test OpenID Connect provider in process and
// returns its issuer.
func startProvider(t *testing.T) string {
	t.Helper()
	var h atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	handler := testidp.Handler(srv.URL, []testidp.Person{
		{ID: "u-alice", Username: "alice", Password: "alice-secret", Email: "alice@lab.example", Groups: []string{"ml-speech", "staff"}, UnixName: "asmith"},
	}, testidp.Client{ID: "gpuportal", Secret: "idp-secret", RedirectURI: portal + "/login/oidc/callback", PostLogoutURI: portal + "/login"},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.Store(&handler)
	return srv.URL
}

var idField = regexp.MustCompile(`name="id" value="([^"]+)"`)

// signInAt plays the browser: it follows authURL to the provider's login
// form, signs in as alice, and returns the query the provider sends back
// to the portal's callback.
func signInAt(t *testing.T, authURL, password string) url.Values {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	var back *url.URL
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), portal) {
			back = r.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := idField.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no login form at the provider: %d %s", resp.StatusCode, body)
	}
	resp, err = c.PostForm(resp.Request.URL.Scheme+"://"+resp.Request.URL.Host+"/login/username",
		url.Values{"id": {string(m[1])}, "username": {"alice"}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if back == nil {
		return nil
	}
	return back.Query()
}

// TestOIDC runs the authorization code flow against a real provider
// (zitadel/oidc's op, in process): the claims come from the verified ID
// token and userinfo; a callback whose state, nonce or PKCE verifier is
// not the flow's, a replayed code, a provider's error, and a wrong client
// secret are refused; an unreachable provider is unavailable.
func TestOIDC(t *testing.T) {
	issuer := startProvider(t)
	ctx := context.Background()
	cfg := identity.OIDCConfig{Name: "Lab SSO", Issuer: issuer, ClientID: "gpuportal",
		RedirectURL: portal + "/login/oidc/callback", Scopes: []string{"profile", "email", "groups"},
		UsernameClaim: "preferred_username", GroupsClaim: "groups", UnixClaim: "unix_name"}
	o := New(cfg.WithClientSecret("idp-secret"))

	authURL, flow, err := o.Start(ctx, "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") != flow.State || q.Get("nonce") != flow.Nonce {
		t.Errorf("authorization request lacks PKCE, state or nonce: %s", authURL)
	}
	back := signInAt(t, authURL, "alice-secret")
	c, err := o.Finish(ctx, flow, back)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "alice" || c.UnixName != "asmith" || c.Subject != issuer+"|u-alice" || c.Source != "oidc" ||
		!slices.Equal(c.Groups, []string{"ml-speech", "staff"}) {
		t.Errorf("claims %+v", c)
	}
	if _, err := o.Finish(ctx, flow, back); !errors.Is(err, ErrFlow) {
		t.Errorf("a replayed code: %v", err)
	}
	if signInAt(t, mustStart(t, o), "wrong") != nil {
		t.Errorf("a wrong password at the provider came back with a code")
	}

	for _, tc := range []struct {
		name   string
		tamper func(f *Flow, q url.Values)
		o      *Provider
	}{
		{"another state", func(f *Flow, q url.Values) { q.Set("state", "forged") }, o},
		{"no flow cookie", func(f *Flow, q url.Values) { *f = Flow{} }, o},
		{"another nonce", func(f *Flow, q url.Values) { f.Nonce = "other" }, o},
		{"another PKCE verifier", func(f *Flow, q url.Values) { f.Verifier = strings.Repeat("v", 43) }, o},
		{"the provider refused", func(f *Flow, q url.Values) { q.Set("error", "access_denied") }, o},
		{"a wrong client secret", func(f *Flow, q url.Values) {}, New(cfg.WithClientSecret("nope"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			authURL, flow, err := tc.o.Start(ctx, "/jobs")
			if err != nil {
				t.Fatal(err)
			}
			back := signInAt(t, authURL, "alice-secret")
			tc.tamper(&flow, back)
			c, err := tc.o.Finish(ctx, flow, back)
			if !errors.Is(err, ErrFlow) {
				t.Errorf("signed in as %+v, err %v", c, err)
			}
			t.Log(err)
		})
	}

	if got := o.LogoutURL(ctx, portal+"/login"); !strings.HasPrefix(got, issuer+"/end_session?") ||
		!strings.Contains(got, "client_id=gpuportal") || !strings.Contains(got, url.QueryEscape(portal+"/login")) {
		t.Errorf("logout URL %q", got)
	}
	down := New(identity.OIDCConfig{Issuer: "http://127.0.0.1:1", ClientID: "x", RedirectURL: portal + "/login/oidc/callback"})
	if _, _, err := down.Start(ctx, "/"); !errors.Is(err, identity.ErrUnavailable) {
		t.Errorf("unreachable provider: %v", err)
	}
	if down.LogoutURL(ctx, portal) != "" {
		t.Errorf("a logout URL from an unreachable provider")
	}
}

func mustStart(t *testing.T, o *Provider) string {
	t.Helper()
	u, _, err := o.Start(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestFlowCookie(t *testing.T) {
	f := Flow{State: "s", Nonce: "n", Verifier: "v", Next: "/jobs?x=1"}
	got, err := DecodeFlow(EncodeFlow(f))
	if err != nil || got != f {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "!!", "e30x", "bm90IGpzb24"} {
		if _, err := DecodeFlow(bad); bad != "" && !errors.Is(err, ErrFlow) {
			t.Errorf("DecodeFlow(%q): %v", bad, err)
		}
	}
}
