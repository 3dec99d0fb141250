package web

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/models"
)

func TestStripPortalCredentials(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("Authorization", "Bearer portal-token")
	h.Set(csrfHeader, "csrf")
	h.Add("Cookie", sessionCookie+"=s3cret; _xsrf=abc; "+csrfCookie+"=c")
	h.Add("Cookie", "username-127-0-0-1-8888=u")
	stripPortalCredentials(h)
	if got := h.Get("Authorization"); got != "" {
		t.Errorf("Authorization %q left", got)
	}
	if got := h.Get(csrfHeader); got != "" {
		t.Errorf("%s %q left", csrfHeader, got)
	}
	if got, want := h.Values("Cookie"), []string{"_xsrf=abc; username-127-0-0-1-8888=u"}; !reflect.DeepEqual(got, want) {
		t.Errorf("cookies %q, want the session's own only: %q", got, want)
	}
	only := http.Header{"Cookie": {sessionCookie + "=s3cret"}}
	stripPortalCredentials(only)
	if _, ok := only["Cookie"]; ok {
		t.Errorf("a Cookie header of the portal's cookie alone is left: %q", only.Values("Cookie"))
	}
}

func TestDropPortalCookies(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Add("Set-Cookie", sessionCookie+"=fixed; Path=/")
	h.Add("Set-Cookie", "_xsrf=2|abc; Path=/sessions/1/x/")
	h.Add("Set-Cookie", " "+strings.ToUpper(csrfCookie)+"=c; Path=/")
	dropPortalCookies(h)
	if got, want := h.Values("Set-Cookie"), []string{"_xsrf=2|abc; Path=/sessions/1/x/"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Set-Cookie %q, want %q", got, want)
	}
}

func TestSessionSameOrigin(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, method, origin string
		websocket            bool
		want                 bool
	}{
		{"a page", http.MethodGet, "", false, true},
		{"a page linked from elsewhere", http.MethodGet, "https://evil.example", false, true},
		{"a form of the portal", http.MethodPost, "https://portal.example", false, true},
		{"a form of another site", http.MethodPost, "https://evil.example", false, false},
		{"a script's POST without Origin", http.MethodPost, "", false, true},
		{"the portal's websocket", http.MethodGet, "https://portal.example", true, true},
		{"another site's websocket", http.MethodGet, "https://evil.example", true, false},
		{"a bad Origin", http.MethodPut, "://", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := http.NewRequest(c.method, "https://portal.example/sessions/1/s/api", nil)
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.websocket {
				r.Header.Set("Upgrade", "websocket")
			}
			if got := sameOrigin(r); got != c.want {
				t.Errorf("sameOrigin = %v, want %v", got, c.want)
			}
		})
	}
}

func TestSessionURLOnlyForWhoMayOpen(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	j := &models.Job{ID: 7, User: "alice", Team: "vision", SessionType: "jupyter", SessionSecret: "k1.s"}
	url := ts.store.SessionPrefix(j)
	if !strings.HasPrefix(url, "/sessions/7/") || strings.Contains(url, "k1.s") {
		t.Fatalf("session URL %q: want /sessions/7/ and a secret derived from the salt", url)
	}
	if err := ts.store.CreateJob(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	shown := appJobs(t, ts.app, j.ID)
	for _, c := range []struct {
		who  *app.User
		want string
	}{
		{&app.User{Name: "alice", Team: "vision", Role: app.RoleResearcher}, url},
		{&app.User{Name: "root", Role: app.RoleAdmin}, url},
		{&app.User{Name: "lead", Team: "vision", Role: app.RoleLead}, ""},
		{&app.User{Name: "bob", Team: "vision", Role: app.RoleResearcher}, ""},
	} {
		aj := api.Job{Session: &api.Session{Type: "jupyter"}}
		ts.withSessionURL(c.who, &shown[0], &aj)
		if aj.Session.URL != c.want {
			t.Errorf("%s sees URL %q, want %q", c.who.Name, aj.Session.URL, c.want)
		}
	}
}
