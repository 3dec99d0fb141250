package web

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAddPortalLink: the link back to the portal goes after the <body>
// tag of an uncompressed HTML page of 200, the length following; any
// other answer passes as it came.
func TestAddPortalLink(t *testing.T) {
	t.Parallel()
	link := portalLinkHTML("https://portal.example/jobs/7", 7)
	for _, tc := range []struct {
		name, ctype, encoding, body string
		status                      int
		want                        string
	}{
		{"a page", "text/html; charset=UTF-8", "", `<html><head></head><BODY class="jp">x</BODY></html>`, 200,
			`<html><head></head><BODY class="jp">` + link + `x</BODY></html>`},
		{"no body tag", "text/html", "", `<p>hi`, 200, `<p>hi`},
		{"not HTML", "application/json", "", `{"body":"<body>"}`, 200, `{"body":"<body>"}`},
		{"compressed", "text/html", "gzip", "\x1f\x8b<body>", 200, "\x1f\x8b<body>"},
		{"a redirect", "text/html", "", `<body>moved`, 302, `<body>moved`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tc.body)), ContentLength: int64(len(tc.body))}
			resp.Header.Set("Content-Type", tc.ctype)
			if tc.encoding != "" {
				resp.Header.Set("Content-Encoding", tc.encoding)
			}
			if err := addPortalLink(resp, link); err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if string(b) != tc.want {
				t.Errorf("body %q, want %q", b, tc.want)
			}
			if resp.ContentLength != int64(len(tc.want)) {
				t.Errorf("length %d, want %d", resp.ContentLength, len(tc.want))
			}
		})
	}
	if !strings.Contains(link, `href="https://portal.example/jobs/7"`) || !strings.Contains(link, `id="gpuportal-back"`) {
		t.Errorf("the link: %s", link)
	}
}

// TestWantsPortalLink: only a page the browser opens as its document
// gets the link, not a frame (a notebook's HTML output), a script's
// fetch or a websocket.
func TestWantsPortalLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		method string
		header map[string]string
		want   bool
	}{
		{"a document", "GET", map[string]string{"Sec-Fetch-Dest": "document", "Accept": "text/html"}, true},
		{"a frame", "GET", map[string]string{"Sec-Fetch-Dest": "iframe", "Accept": "text/html"}, false},
		{"a fetch", "GET", map[string]string{"Sec-Fetch-Dest": "empty", "Accept": "*/*"}, false},
		{"an older browser's page", "GET", map[string]string{"Accept": "text/html,application/xhtml+xml"}, true},
		{"an API call", "GET", map[string]string{"Accept": "application/json"}, false},
		{"a form post", "POST", map[string]string{"Sec-Fetch-Dest": "document"}, false},
		{"a websocket", "GET", map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Accept": "text/html"}, false},
	} {
		r, _ := http.NewRequest(tc.method, "http://s/sessions/7/x/tree", nil)
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		if got := wantsPortalLink(r); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
