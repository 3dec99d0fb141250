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
