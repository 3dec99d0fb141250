package web

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// get sends a GET with the headers given as name, value pairs.
func (ts *testServer) get(t *testing.T, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	ts.Handler().ServeHTTP(rec, req)
	return rec
}

// TestStaticFiles checks how static files are served: pages link them
// with a version that browsers may keep for a year, unversioned requests
// revalidate with an ETag, and large ones are compressed.
func TestStaticFiles(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	login := ts.get(t, "/login").Body.String()
	m := regexp.MustCompile(`href="/static/portal\.css\?v=([0-9a-f]+)"`).FindStringSubmatch(login)
	if m == nil {
		t.Fatalf("the login page links no versioned style sheet:\n%s", login)
	}
	version := m[1]
	if !strings.Contains(login, `rel="icon"`) {
		t.Error("the login page names no icon")
	}
	etag := `"` + version + `"`
	cases := []struct {
		name         string
		target       string
		header       []string
		status       int
		cacheControl string
		encoding     string
	}{
		{"a versioned file is kept for a year", "/static/portal.css?v=" + version, nil, 200, immutable, ""},
		{"an unversioned file is revalidated", "/static/portal.css", nil, 200, "no-cache", ""},
		{"an old version is revalidated", "/static/portal.css?v=0123", nil, 200, "no-cache", ""},
		{"a current copy is not sent again", "/static/portal.css", []string{"If-None-Match", etag}, 304, "no-cache", ""},
		{"a large file is compressed for who accepts it", "/static/portal.css?v=" + version, []string{"Accept-Encoding", "gzip"}, 200, immutable, "gzip"},
		{"a file that does not exist", "/static/nope.css", nil, 404, "", ""},
		{"no way out of the folder", "/static/../static.go", nil, 404, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := ts.get(t, c.target, c.header...)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d", rec.Code, c.status)
			}
			if got := rec.Header().Get("Cache-Control"); got != c.cacheControl {
				t.Errorf("Cache-Control %q, want %q", got, c.cacheControl)
			}
			if got := rec.Header().Get("Content-Encoding"); got != c.encoding {
				t.Errorf("Content-Encoding %q, want %q", got, c.encoding)
			}
			if c.status == 200 && rec.Header().Get("ETag") != etag {
				t.Errorf("ETag %q, want %q", rec.Header().Get("ETag"), etag)
			}
			if c.encoding == "gzip" {
				zr, err := gzip.NewReader(rec.Body)
				if err != nil {
					t.Fatal(err)
				}
				css, err := io.ReadAll(zr)
				if err != nil || !strings.Contains(string(css), ":root") {
					t.Errorf("the compressed style sheet does not read back: %v", err)
				}
			}
		})
	}
	fav := ts.get(t, "/favicon.ico")
	if fav.Code != 200 || fav.Header().Get("Content-Type") != "image/svg+xml" {
		t.Errorf("/favicon.ico: status %d, type %q", fav.Code, fav.Header().Get("Content-Type"))
	}
}

// TestErrorPages checks that a person who reaches a page they may not see,
// or one that does not exist, gets a page in the portal's frame that says
// so and offers a way back; the API and page fragments get the message.
func TestErrorPages(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	cases := []struct {
		name, role, target string
		header             []string
		status             int
		says               []string
	}{
		{"a researcher on the admin page", "alice", "/admin", nil, 403,
			[]string{"You may not see this", "Only admins may do this.", `href="/jobs"`, "Log out"}},
		{"another team's page", "alice", "/teams/nlp", []string{"Referer", "http://example.com/teams"}, 403,
			[]string{"You may not see this", "Only members of nlp and admins may see its page.", `href="/teams"`}},
		{"a page that does not exist", "alice", "/no/such/page", nil, 404,
			[]string{"Page not found", "There is no page at /no/such/page.", `href="/jobs"`}},
		{"a job that does not exist", "lead", "/jobs/999999", nil, 404, []string{"Page not found", "Go to the jobs list"}},
		{"a fragment gets the message alone", "alice", "/teams/nlp", []string{"HX-Request", "true"}, 403,
			[]string{"only members of nlp and admins may see its page"}},
		{"the API answers JSON", "alice", "/api/v1/teams/nlp", nil, 403, []string{`{"error":"only members of nlp`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, c.target, nil)
			req.Host = "example.com"
			for i := 0; i+1 < len(c.header); i += 2 {
				req.Header.Set(c.header[i], c.header[i+1])
			}
			if strings.HasPrefix(c.target, "/api/") {
				req.Header.Set("Authorization", "Bearer "+ts.tokens[c.role])
			} else {
				req.AddCookie(&http.Cookie{Name: sessionCookie, Value: ts.sessions[c.role]})
			}
			rec := httptest.NewRecorder()
			ts.Handler().ServeHTTP(rec, req)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d", rec.Code, c.status)
			}
			body := rec.Body.String()
			for _, s := range c.says {
				if !strings.Contains(body, s) {
					t.Errorf("the answer does not say %q:\n%s", s, body)
				}
			}
			if c.header == nil && !strings.HasPrefix(c.target, "/api/") && !strings.HasPrefix(strings.ToLower(body), "<!doctype html>") {
				t.Errorf("not a page:\n%s", body)
			}
		})
	}
}

func TestBackTo(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, referer, path, want string }{
		{"a page of this site", "http://portal/teams?x=1", "/teams/nlp", "/teams?x=1"},
		{"another site", "http://evil.example/teams", "/teams/nlp", ""},
		{"the same page", "http://portal/teams/nlp", "/teams/nlp", ""},
		{"no referer", "", "/teams/nlp", ""},
		{"a protocol-relative trick", "http://portal//evil.example", "/x", "/jobs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, c.path, nil)
			req.Host = "portal"
			if c.referer != "" {
				req.Header.Set("Referer", c.referer)
			}
			if got := backTo(req); got != c.want {
				t.Errorf("backTo(Referer %q) = %q, want %q", c.referer, got, c.want)
			}
		})
	}
}
