package web

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeptOutputOfAGoneMachine: the server's copy of a remote job's
// output is served once the machine's agent is gone (no machine is
// connected here), on the API, the download and the job's page.
func TestKeptOutputOfAGoneMachine(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.cfg.DataDir = t.TempDir()
	id := ts.newJob(t)
	dir := filepath.Join(ts.cfg.DataDir, "agents", "gpu-gone", "jobs", fmt.Sprint(id))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "output.log"), []byte("epoch 1 loss 0.9\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{
		fmt.Sprintf("/api/v1/jobs/%d/logs", id),
		fmt.Sprintf("/api/v1/jobs/%d/logs?download=1", id),
		fmt.Sprintf("/jobs/%d", id),
	} {
		rec := ts.do(t, "alice", http.MethodGet, target, "")
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "epoch 1 loss 0.9") {
			t.Errorf("%s: %d %.200s", target, rec.Code, rec.Body.String())
		}
	}
	if rec := ts.do(t, "bob", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/logs", id), ""); rec.Code != http.StatusNotFound {
		t.Errorf("another team's member: %d, want 404 (to him the job does not exist)", rec.Code)
	}
}

// TestJobLogFromOffset: a client follows a job's output by asking from
// the offset it has read to: the rest from there, nothing at the end,
// the size in X-Log-Size (less than the offset when the output started
// anew); a bad offset is refused naming it.
func TestJobLogFromOffset(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.cfg.DataDir = t.TempDir()
	id := ts.newJob(t)
	dir := filepath.Join(ts.cfg.DataDir, "agents", "gpu-gone", "jobs", fmt.Sprint(id))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	const out = "epoch 1 loss 0.9\nepoch 2 loss 0.7\n"
	if err := os.WriteFile(filepath.Join(dir, "output.log"), []byte(out), 0o640); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query string
		code  int
		body  string
	}{
		{"offset=0", http.StatusOK, out},
		{"offset=17", http.StatusOK, "epoch 2 loss 0.7\n"},
		{"offset=17&tail_bytes=3", http.StatusOK, "epoch 2 loss 0.7\n"},
		{"offset=34", http.StatusOK, ""},
		{"offset=500", http.StatusOK, ""},
		{"offset=-1", http.StatusBadRequest, "offset"},
		{"offset=x", http.StatusBadRequest, "offset"},
	} {
		rec := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/logs?%s", id, tc.query), "")
		if rec.Code != tc.code || tc.code == http.StatusOK && rec.Body.String() != tc.body ||
			tc.code != http.StatusOK && !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s: %d %q, want %d %q", tc.query, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
		if size := rec.Header().Get("X-Log-Size"); tc.code == http.StatusOK && size != "34" {
			t.Errorf("%s: X-Log-Size %q, want 34", tc.query, size)
		}
	}
}
