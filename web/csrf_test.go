package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestLoginCSRF: another site cannot log a visitor in to an account of
// its choosing. A login POST that a browser sent from another site is
// refused whatever token it carries, a token from a cookie the attacker
// planted included; over TLS the token's cookie is a __Host- cookie, so
// a planted plain one counts for nothing; and the token before login
// ends at login.
func TestLoginCSRF(t *testing.T) {
	t.Parallel()
	const planted = "c0ffee" + "0000000000000000000000000000000000000000000000000000000000"
	login := func(ts *testServer, cookie string, headers map[string]string) *httptest.ResponseRecorder {
		t.Helper()
		form := url.Values{"username": {"alice"}, "password": {"password1"}, "_csrf": {planted}}
		req := httptest.NewRequest(http.MethodPost, "http://portal.example/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: cookie, Value: planted})
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, req)
		return rec
	}
	plain := newTestServer(t)
	secure := newTestServer(t, func(c *testConfig) { c.SecureCookies = true })
	for _, c := range []struct {
		name    string
		ts      *testServer
		cookie  string
		headers map[string]string
		want    int
	}{
		{"a cross-site Origin", plain, csrfCookie, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"a cross-site Origin over TLS", secure, csrfHostCookie, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"cross-site by Sec-Fetch-Site", plain, csrfCookie, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://portal.example"}, http.StatusForbidden},
		{"a sibling subdomain (same-site)", plain, csrfCookie, map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "https://x.portal.example"}, http.StatusForbidden},
		{"over TLS, a planted cookie without __Host-", secure, csrfCookie, map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusForbidden},
		{"from the login page itself", plain, csrfCookie, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://portal.example"}, http.StatusSeeOther},
		{"from the login page itself, by Origin", plain, csrfCookie, map[string]string{"Origin": "http://portal.example"}, http.StatusSeeOther},
		{"from the login page over TLS", secure, csrfHostCookie, map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther},
		{"a client that is no browser", plain, csrfCookie, nil, http.StatusSeeOther},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := login(c.ts, c.cookie, c.headers)
			if rec.Code != c.want {
				t.Fatalf("status %d, want %d; body %.200s", rec.Code, c.want, rec.Body.String())
			}
			var session, ended bool
			for _, ck := range (&http.Response{Header: rec.Header()}).Cookies() {
				session = session || ck.Name == sessionCookie && ck.Value != ""
				ended = ended || ck.Name == c.ts.csrfCookieName() && ck.MaxAge < 0
			}
			if c.want == http.StatusForbidden && session {
				t.Errorf("refused, yet a session cookie was set")
			}
			if c.want == http.StatusSeeOther && (!session || !ended) {
				t.Errorf("logged in: session cookie %v, the token before login ended %v; want both", session, ended)
			}
		})
	}

	// Over TLS the login page sets a __Host- cookie: Secure, path /, no
	// Domain.
	rec := httptest.NewRecorder()
	secure.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/login", nil))
	var got *http.Cookie
	for _, ck := range (&http.Response{Header: rec.Header()}).Cookies() {
		if strings.Contains(ck.Name, csrfCookie) {
			got = ck
		}
	}
	if got == nil || got.Name != csrfHostCookie || !got.Secure || got.Path != "/" || got.Domain != "" {
		t.Errorf("the login page's CSRF cookie over TLS: %+v; want __Host-%s, Secure, path /", got, csrfCookie)
	}
}
