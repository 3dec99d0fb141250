package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/gorilla/websocket"
)

// contractBase is the server URL the validator's copy of web/openapi.json
// names; requests are rewritten onto it before they are matched, so one
// router serves every test server whatever its port.
const contractBase = "http://gpuportal.test/api/v1"

// contract loads web/openapi.json once per test binary and builds the
// router that finds each exchange's operation.
var contract = sync.OnceValues(func() (routers.Router, error) {
	// A mismatch names the field and the reason; the schema and value
	// it would print too take a screen each.
	openapi3.SchemaErrorDetailsDisabled = true
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../web/openapi.json")
	if err != nil {
		return nil, fmt.Errorf("load web/openapi.json: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("web/openapi.json is not a valid OpenAPI document: %w", err)
	}
	doc.Servers = openapi3.Servers{{URL: contractBase}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("router for web/openapi.json: %w", err)
	}
	return r, nil
})

// checkContract validates one API exchange against web/openapi.json: the
// request (path, query, body), unless the test sent it malformed on
// purpose, and the response (status documented, body matching its schema,
// required fields present, no null where the document does not allow
// one). It returns every mismatch, or nil.
func checkContract(req *http.Request, reqBody []byte, malformed bool, status int, header http.Header, respBody []byte) error {
	if !strings.HasPrefix(req.URL.Path, "/api/v1/") {
		// Pages and what an interactive session serves through the
		// portal's proxy (/sessions/ID/SECRET/...) are not the REST API.
		return nil
	}
	router, err := contract()
	if err != nil {
		return err
	}
	u, err := url.Parse(contractBase + strings.TrimPrefix(req.URL.Path, "/api/v1"))
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", req.URL, err)
	}
	u.RawQuery = req.URL.RawQuery
	r := req.Clone(context.Background())
	r.URL = u
	r.Host = u.Host
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := router.FindRoute(r)
	if err != nil {
		if malformed && status >= 400 {
			return nil // a path the API does not have, asked on purpose
		}
		return fmt.Errorf("%s %s: no operation in web/openapi.json (answered %d): %w", req.Method, req.URL.Path, status, err)
	}
	opts := &openapi3filter.Options{
		// The tests authenticate with real tokens; the server, not the
		// document, decides who may ask (authz_test.go).
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		MultiError:         true,
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	var errs []string
	if !malformed {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			hint := ""
			if status >= 400 {
				hint = fmt.Sprintf(" (the server refused it with %d: if the test sends it malformed on purpose, mark it with malformedRequest, api.malformed or cli.malformed)", status)
			}
			errs = append(errs, "request: "+err.Error()+hint)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		errs = append(errs, fmt.Sprintf("response %d: %v", status, err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s %s breaks web/openapi.json:\n%s\nrequest body: %.500s\nresponse body: %.2000s",
			req.Method, req.URL.RequestURI(), strings.Join(errs, "\n"), reqBody, respBody)
	}
	return nil
}

// reporter is where a mismatch goes: the test that made the call.
type reporter interface {
	Errorf(format string, args ...any)
}

// contractServers are the gpuportal servers the tests run, by host
// ("127.0.0.1:PORT"), each with the test that started it. The exchanges
// with them are the ones contractTransport checks; a mismatch goes to
// the test the request names (withReporter), else to the server's test.
type contractServers struct {
	mu sync.Mutex
	m  map[string]reporter
}

// add registers the server at base (a URL) for the test rep until the
// returned func is called.
func (s *contractServers) add(base string, rep reporter) (remove func()) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		rep.Errorf("contract: cannot check the server at %q: %v", base, err)
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[u.Host] = rep
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.m[u.Host] == rep {
			delete(s.m, u.Host)
		}
	}
}

func (s *contractServers) owner(host string) (reporter, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep, ok := s.m[host]
	return rep, ok
}

// checkedServers are the servers startServer and supervise run: TestMain
// makes http.DefaultTransport a contractTransport over them, so every
// client the tests use (http.Get, http.DefaultClient, an http.Client
// without a Transport of its own, the CLI's proxy) is checked.
var checkedServers = &contractServers{m: map[string]reporter{}}

// checkServer checks every API exchange with the server at base for t,
// until t ends.
func checkServer(t testing.TB, base string) {
	t.Cleanup(checkedServers.add(base, t))
}

type reporterKey struct{}

type malformedKey struct{}

// withReporter names the test a request's mismatches are reported to.
func withReporter(ctx context.Context, rep reporter) context.Context {
	return context.WithValue(ctx, reporterKey{}, rep)
}

// malformedRequest marks a request the test sends malformed on purpose
// (to see the server refuse it): only its response is checked.
func malformedRequest(req *http.Request) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), malformedKey{}, true))
}

// contractTransport checks every exchange with an /api/v1 path of a
// server in servers against web/openapi.json (checkContract) and reports
// each mismatch to the test that made the call. Everything else passes
// through untouched: other servers (Prometheus has an /api/v1 too),
// pages, /metrics, websocket upgrades.
type contractTransport struct {
	next    http.RoundTripper
	servers *contractServers
}

func (c contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	owner, ok := c.servers.owner(req.URL.Host)
	if !ok || !strings.HasPrefix(req.URL.Path, "/api/v1/") || req.Header.Get("Upgrade") != "" {
		return c.next.RoundTrip(req)
	}
	rep := owner
	if r, ok := req.Context().Value(reporterKey{}).(reporter); ok {
		rep = r
	}
	malformed, _ := req.Context().Value(malformedKey{}).(bool)
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s %s: read the request body: %w", req.Method, req.URL, err)
		}
		reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		// The server went away mid-answer (the fault tests kill it):
		// the caller gets what came and the error, as it would have.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(raw), errReader{err}))
		return resp, nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	body := raw
	if resp.Header.Get("Content-Encoding") == "gzip" {
		// Asked for by the client itself (the CLI, through the proxy):
		// Go's transport leaves the body compressed.
		if body, err = gunzip(raw); err != nil {
			rep.Errorf("%s %s: the answer says gzip: %v", req.Method, req.URL.RequestURI(), err)
			return resp, nil
		}
	}
	if err := checkContract(req, reqBody, malformed, resp.StatusCode, resp.Header, body); err != nil {
		rep.Errorf("%v", err)
	}
	return resp, nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	return out, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// contractProxy is a reverse proxy to the server at target, in the test
// process, for the CLI: every request the CLI sends and every answer it
// gets pass http.DefaultTransport, so both are checked and a mismatch
// fails t. With malformed, the requests are sent malformed on purpose:
// only the answers are checked. Websockets and streams pass through. It
// returns the proxy's URL, to give the CLI as its server.
func contractProxy(t testing.TB, target string, malformed bool) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("contract proxy to %q: %v", target, err)
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out = pr.Out.WithContext(withReporter(pr.Out.Context(), t))
			if malformed {
				pr.Out = malformedRequest(pr.Out)
			}
		},
		FlushInterval: -1,
	}
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	return ts.URL
}

// recorder is a reporter that keeps what it is told.
type recorder struct {
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := r.errs
	r.errs = nil
	return errs
}

// TestContractCatchesDrift proves the check is not a no-op: a stand-in
// server answers as the document does not allow, and the transport every
// test's client uses (http.DefaultTransport, installed by TestMain)
// reports it, naming the call.
func TestContractCatchesDrift(t *testing.T) {
	if _, ok := http.DefaultTransport.(contractTransport); !ok {
		t.Fatalf("http.DefaultTransport is a %T: TestMain must make it a contractTransport", http.DefaultTransport)
	}
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		status, _ := strconv.Atoi(r.URL.Query().Get("status"))
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, r.URL.Query().Get("answer"))
	}))
	defer fake.Close()
	rec := &recorder{}
	t.Cleanup(checkedServers.add(fake.URL, rec))

	for _, tc := range []struct {
		name      string
		method    string // GET /api/v1/gpus or POST /api/v1/jobs with body
		body      string
		malformed bool
		upgrade   bool
		status    int    // the stand-in's answer
		answer    string // its body
		want      string // in the report; "" for none
	}{
		{"an empty list", "GET", "", false, false, 200, `[]`, ""},
		{"null where an array is documented", "GET", "", false, false, 200, `null`, "GET /api/v1/gpus?"},
		{"a wrong type", "GET", "", false, false, 200, `{"gpus":1}`, "response 200"},
		{"an undocumented status", "GET", "", false, false, 418, `{}`, "response 418"},
		{"a websocket upgrade passes untouched", "GET", "", false, true, 200, `null`, ""},
		{"a malformed request", "POST", `{"name":"x","gpus":"two"}`, false, false, 400, `{"error":"gpus: a number"}`, "request: "},
		{"a malformed request, on purpose", "POST", `{"name":"x","gpus":"two"}`, true, false, 400, `{"error":"gpus: a number"}`, ""},
		{"a malformed request, on purpose, with a bad answer", "POST", `{"name":"x","gpus":"two"}`, true, false, 400, `null`, "response 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/api/v1/gpus?"
			var body io.Reader
			if tc.method == "POST" {
				path, body = "/api/v1/jobs?", strings.NewReader(tc.body)
			}
			q := url.Values{"status": {strconv.Itoa(tc.status)}, "answer": {tc.answer}}
			req, err := http.NewRequest(tc.method, fake.URL+path+q.Encode(), body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tc.upgrade {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
			}
			if tc.malformed {
				req = malformedRequest(req)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(got) != tc.answer || resp.StatusCode != tc.status {
				t.Errorf("the caller read %d %q, want the server's %d %q", resp.StatusCode, got, tc.status, tc.answer)
			}
			errs := rec.take()
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("reported %q, want nothing", errs)
			case tc.want != "" && (len(errs) != 1 || !strings.Contains(errs[0], tc.want)):
				t.Errorf("reported %q, want one report containing %q", errs, tc.want)
			}
		})
	}

	// A server nobody registered (Prometheus has an /api/v1 too) is not
	// checked; the reporter a request names is told, not the server's.
	other := &recorder{}
	resp, err := http.Get(strings.Replace(fake.URL, "127.0.0.1", "localhost", 1) + "/api/v1/gpus?answer=null")
	if err == nil {
		resp.Body.Close()
	}
	req, _ := http.NewRequestWithContext(withReporter(context.Background(), other), http.MethodGet, fake.URL+"/api/v1/gpus?answer=null", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	if errs := rec.take(); len(errs) != 0 {
		t.Errorf("the server's test was told %q: the request named its own", errs)
	}
	if errs := other.take(); len(errs) != 1 {
		t.Errorf("the request's reporter was told %q, want one mismatch", errs)
	}

	// The CLI's proxy passes a websocket through, unchecked.
	up := websocket.Upgrader{}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		if typ, msg, err := c.ReadMessage(); err == nil {
			_ = c.WriteMessage(typ, msg)
		}
	}))
	defer echo.Close()
	t.Cleanup(checkedServers.add(echo.URL, rec))
	proxy := contractProxy(t, echo.URL, false)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(proxy, "http")+"/api/v1/agents/connect", nil)
	if err != nil {
		t.Fatalf("websocket through the contract proxy: %v", err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "ping" {
		t.Errorf("websocket through the contract proxy echoed %q, %v", msg, err)
	}
	if errs := rec.take(); len(errs) != 0 {
		t.Errorf("a websocket was checked: %q", errs)
	}
}
