package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/client"
)

// browser is an HTTP client with cookies, as a logged-in browser.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: localhostTransport}}
}

// dialLocalhost dials as a browser does: every name under localhost is
// this machine (serve --dev serves each session at sID.localhost).
func dialLocalhost(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil && strings.HasSuffix(strings.ToLower(host), ".localhost") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// localhostTransport is http.DefaultTransport (checked against the API's
// contract) that reaches sessions' hosts.
var localhostTransport = func() http.RoundTripper {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = dialLocalhost
	return contractTransport{next: tr, servers: checkedServers}
}()

// wsDialer is a websocket dialer that reaches sessions' hosts.
var wsDialer = &websocket.Dialer{NetDialContext: dialLocalhost, HandshakeTimeout: 10 * time.Second}

// at is a browser with b's cookies at another address (a session's).
func (b *browser) at(base string) *browser { return &browser{t: b.t, base: base, c: b.c} }

// openSession opens the session at prefix as b's user would, from its
// link on the portal: handed over to the session's own host, whose
// address it returns with b's cookies there.
func (b *browser) openSession(prefix string) *browser {
	b.t.Helper()
	var final *url.URL
	eventually(b.t, 30*time.Second, "the session at "+prefix+" to open", func() bool {
		resp, err := b.c.Get(b.base + prefix)
		if err != nil {
			b.t.Fatalf("open %s: %v", prefix, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		final = resp.Request.URL
		return resp.StatusCode == http.StatusOK
	})
	if final.Host == "" || !strings.HasSuffix(final.Hostname(), ".localhost") {
		b.t.Fatalf("the session at %s was served at %s, not on a host of its own", prefix, final)
	}
	return b.at(final.Scheme + "://" + final.Host)
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// get fetches path and returns the status and body.
func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// csrf reads the CSRF token from a form page.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	_, body := b.get(path)
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no CSRF token on %s:\n%s", path, body)
	}
	return m[1]
}

// post submits a form and returns the final status, URL and body.
func (b *browser) post(path string, form url.Values) (int, string, string) {
	b.t.Helper()
	resp, err := b.c.PostForm(b.base+path, form)
	if err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Request.URL.Path, string(body)
}

func (b *browser) login(user, password string) {
	b.t.Helper()
	status, path, body := b.post("/login", url.Values{
		"_csrf": {b.csrf("/login")}, "username": {user}, "password": {password},
	})
	if status != http.StatusOK || path != "/jobs" {
		b.t.Fatalf("login as %s: status %d at %s:\n%s", user, status, path, body)
	}
}

// api is a REST client with a bearer token. Its exchanges are checked
// against web/openapi.json (contractTransport); a mismatch fails a.t.
type api struct {
	t     *testing.T
	base  string
	token string
	// badInput: the test sends its requests malformed on purpose (see
	// malformed).
	badInput bool
}

// malformed is a with requests the test sends malformed on purpose, to
// see the server refuse them: only the answers are checked against
// web/openapi.json.
func (a *api) malformed() *api {
	b := *a
	b.badInput = true
	return &b
}

// newAPI gets a token for user with HTTP basic auth (package client).
func newAPI(t *testing.T, base, user, password string) *api {
	t.Helper()
	return &api{t: t, base: base, token: goClientToken(t, base, user, password)}
}

// client is a's Go client (package client), checked as a is.
func (a *api) client() *client.Client {
	a.t.Helper()
	cl, err := client.New(a.base, a.token, client.WithHTTPClient(http.DefaultClient))
	if err != nil {
		a.t.Fatal(err)
	}
	return cl
}

// do sends a request with an optional JSON body and decodes the JSON answer into out.
func (a *api) do(method, path string, body any, out any) int {
	a.t.Helper()
	var reqBody []byte
	switch b := body.(type) {
	case nil:
	case string:
		reqBody = []byte(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		reqBody = buf
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(withReporter(context.Background(), a.t), method, a.base+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	if a.badInput {
		req = malformedRequest(req)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: status %d, body %q: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// jobView is the part of the API's job the tests read.
type jobView struct {
	ID          int64      `json:"id"`
	Name        string     `json:"name"`
	Team        string     `json:"team"`
	User        string     `json:"user"`
	State       string     `json:"state"`
	Reason      string     `json:"reason"`
	Queue       int        `json:"queue"`
	Image       string     `json:"image"`
	SubmittedAt time.Time  `json:"submitted_at"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	JCTS        *float64   `json:"jct_s"`
	Placement   []string   `json:"placement"`
	ExitCode    *int       `json:"exit_code"`
	Preemptions int        `json:"preemptions"`
	Failures    int        `json:"failures"`
	ExecutedS   float64    `json:"executed_s"`
}

func (a *api) job(id int64) jobView {
	a.t.Helper()
	var raw json.RawMessage
	if _, err := a.client().Job(withReporter(context.Background(), a.t), id, client.RawJSON(&raw)); err != nil {
		a.t.Fatalf("GET job %d: %v", id, err)
	}
	var j jobView
	if err := json.Unmarshal(raw, &j); err != nil {
		a.t.Fatalf("GET job %d: %v", id, err)
	}
	return j
}

// waitQueue waits until job id is in priority queue q: a running job
// is demoted there once its attained service crosses a threshold.
func (a *api) waitQueue(id int64, timeout time.Duration, q int) {
	a.t.Helper()
	eventually(a.t, timeout, fmt.Sprintf("job %d to be in queue %d", id, q), func() bool { return a.job(id).Queue == q })
}

func (a *api) waitState(id int64, timeout time.Duration, states ...string) jobView {
	a.t.Helper()
	var j jobView
	ok := poll(timeout, func() bool {
		j = a.job(id)
		for _, s := range states {
			if j.State == s {
				return true
			}
		}
		return false
	})
	if !ok {
		// What it is instead tells a stuck job from a slow one.
		a.t.Fatalf("timed out after %v waiting for job %d to be %v: it is %s (%q)", timeout, id, states, j.State, j.Reason)
	}
	return j
}

// waitTracedEnd waits for traced job id (tracedJob, its lines in traces)
// to be one of states, for as long as its trace keeps growing: a job's
// ticks are a sleep and two processes started each, and on a loaded
// 2-core machine they came at a quarter of their pace, so a fixed wait
// sized by the ticks failed jobs that were running still. It fails once
// the trace has not grown for stall, or after limit in all.
func (a *api) waitTracedEnd(traces string, id int64, stall, limit time.Duration, states ...string) jobView {
	a.t.Helper()
	path := filepath.Join(traces, fmt.Sprintf("job-%d.trace", id))
	size, grew, began := int64(-1), time.Now(), time.Now()
	for {
		j := a.job(id)
		if slices.Contains(states, j.State) {
			return j
		}
		if fi, err := os.Stat(path); err == nil && fi.Size() != size {
			size, grew = fi.Size(), time.Now()
		}
		if time.Since(grew) > stall || time.Since(began) > limit {
			a.t.Fatalf("job %d is %s (%q), not %v, after %v; its trace %d bytes, last grown %v ago",
				id, j.State, j.Reason, states, time.Since(began).Round(time.Second), size, time.Since(grew).Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond) // about time: a poll
	}
}
