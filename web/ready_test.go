package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/templates"
)

// TestReadyz: ready with a writable data folder; 503 naming the cause
// when the folder cannot take a file, and /healthz tells it too.
func TestReadyz(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.cfg.DataDir = t.TempDir()
	if rec := ts.do(t, "anonymous", http.MethodGet, "/readyz", ""); rec.Code != http.StatusOK {
		t.Fatalf("ready: %d %s", rec.Code, rec.Body.String())
	}
	if left, _ := filepath.Glob(filepath.Join(ts.cfg.DataDir, ".ready-*")); len(left) > 0 {
		t.Errorf("the probe left %v", left)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ts.cfg.DataDir = notDir
	ts.readiness.at = ts.readiness.at.AddDate(-1, 0, 0) // forget the last probe
	rec := ts.do(t, "anonymous", http.MethodGet, "/readyz", "")
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	if rec.Code != http.StatusServiceUnavailable || !strings.HasPrefix(fmt.Sprint(out["cause"]), "data folder:") {
		t.Errorf("unwritable data folder: %d %s", rec.Code, rec.Body.String())
	}
	rec = ts.do(t, "anonymous", http.MethodGet, "/healthz", "")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"ready":false`) {
		t.Errorf("healthz while not ready: %d %s; want 200 (it runs) saying ready false", rec.Code, rec.Body.String())
	}
}

// TestCannotSaveIsNotAnInternalError: a store that cannot save is a 503
// that says so, on pages and in the API.
func TestCannotSaveIsNotAnInternalError(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	for _, path := range []string{"/jobs", "/api/v1/jobs"} {
		req := httptest.NewRequest(http.MethodPost, path, nil)
		rec := httptest.NewRecorder()
		c := ts.echo.NewContext(req, rec)
		ts.handleError(fmt.Errorf("create job: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), c)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cannot save right now") ||
			rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body.String())
		}
		req = httptest.NewRequest(http.MethodPost, path, nil)
		rec = httptest.NewRecorder()
		ts.handleError(errors.New("a bug"), ts.echo.NewContext(req, rec))
		if rec.Code != http.StatusInternalServerError {
			t.Errorf("%s: a bug gave %d", path, rec.Code)
		}
	}
}

// TestDatabaseOutageIsNamed: while the database is unreachable, a request
// it failed is a 503 naming the outage and since when; /readyz says so
// without probing; every answer carries X-Data-Age and pages a banner.
// Once it answers again, none of it.
func TestDatabaseOutageIsNamed(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.cfg.DataDir = t.TempDir()
	unreachable := fmt.Errorf("API token: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	at := ts.cfg.Now()
	ts.db.observe(nil, at.Add(-20*time.Second)) // the database last answered
	ts.db.observe(unreachable, at.Add(-10*time.Second))
	since := at.Add(-10 * time.Second).Format("15:04:05")

	req := httptest.NewRequest(http.MethodPost, "/api/v1/jobs", nil)
	rec := httptest.NewRecorder()
	ts.handleError(unreachable, ts.echo.NewContext(req, rec))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "The database is unreachable since "+since) ||
		rec.Header().Get("Retry-After") == "" {
		t.Errorf("refusal: %d %s, Retry-After %q", rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"))
	}
	rec = ts.do(t, "anonymous", http.MethodGet, "/readyz", "")
	age, err := strconv.Atoi(rec.Header().Get(dataAgeHeader))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "database unreachable since "+since) ||
		err != nil || age < 20 {
		t.Errorf("/readyz: %d %s, %s %q; want 503 naming the outage, data 20 s old or more", rec.Code, rec.Body.String(),
			dataAgeHeader, rec.Header().Get(dataAgeHeader))
	}
	// A page served meanwhile says how old its data is.
	c := ts.echo.NewContext(httptest.NewRequest(http.MethodGet, "/jobs", nil), httptest.NewRecorder())
	var p templates.Page
	_ = ts.dataAge(func(c echo.Context) error { p = page(c, "Jobs", "jobs"); return nil })(c)
	if !strings.Contains(p.Warning, "data as of") {
		t.Errorf("page banner = %q, want the data's age", p.Warning)
	}

	ts.db.observe(nil, ts.cfg.Now())
	rec = ts.do(t, "anonymous", http.MethodGet, "/readyz", "")
	if rec.Code != http.StatusOK || rec.Header().Get(dataAgeHeader) != "" {
		t.Errorf("/readyz once the database answers: %d %s, %s %q", rec.Code, rec.Body.String(), dataAgeHeader, rec.Header().Get(dataAgeHeader))
	}
}

// TestActionUnavailableIsNoOutage: an action's own Unavailable refusal
// that carries a network error (a machine's files helper that closed
// the connection: a *url.Error) answers 503 with its own message and
// marks no database outage. It used to answer "The database is
// unreachable since ..." and put the outage banner on every page until
// the next ping (audit3, a job's files on the demo).
func TestActionUnavailableIsNoOutage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	files := &app.Error{Kind: app.Unavailable, Msg: "cannot reach the job's files: EOF",
		Err: &url.Error{Op: "Get", URL: "http://job-files/list?path=.&root=job", Err: io.EOF}}
	rec := httptest.NewRecorder()
	ts.handleError(fmt.Errorf("files: %w", files), ts.echo.NewContext(httptest.NewRequest(http.MethodGet, "/api/v1/jobs/3/files", nil), rec))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cannot reach the job's files") {
		t.Errorf("refusal: %d %s, want 503 with the action's message", rec.Code, rec.Body.String())
	}
	if down, _, _ := ts.db.outage(); down {
		t.Error("the files helper's EOF marked the database down")
	}
}
