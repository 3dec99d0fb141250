package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDrainAndLogs drains a machine, checks new jobs avoid it, reads a
// job's output through the API, and finds the drain in the audit log.
func TestDrainAndLogs(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "2x1x80", "--dev-token", "dev-admin")
	admin := &api{t: t, base: srv.URL, token: "dev-admin"}
	alice := newAPI(t, srv.URL, "alice", "dev")

	var node struct{ Name, State string }
	if st := alice.do("POST", "/api/v1/nodes/node-0/drain", nil, nil); st != http.StatusForbidden {
		t.Errorf("researcher drains a node: status %d, want 403", st)
	}
	if st := admin.do("POST", "/api/v1/nodes/node-0/drain", nil, &node); st != http.StatusOK || node.State != "drained" {
		t.Fatalf("drain: status %d, node %+v", st, node)
	}
	var j jobView
	if st := alice.do("POST", "/api/v1/jobs", map[string]any{
		"name": "hello", "gpus": 1, "command": []string{"sh", "-c", "for i in 1 2 3; do echo line $i; done"},
	}, &j); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	done := alice.waitState(j.ID, 30*time.Second, "succeeded")
	if len(done.Placement) != 1 || !strings.HasPrefix(done.Placement[0], "node-1:") {
		t.Errorf("job ran on %v; node-0 is drained", done.Placement)
	}

	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/logs?tail_bytes=14", srv.URL, j.ID), nil)
	req.Header.Set("Authorization", "Bearer "+alice.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "line 2\nline 3\n" {
		t.Errorf("log tail: status %d, %q; want the last 14 bytes", resp.StatusCode, body)
	}
	req, _ = http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/logs?download=1", srv.URL, j.ID), nil)
	req.Header.Set("Authorization", "Bearer "+alice.token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") || !strings.HasPrefix(string(body), "line 1\n") {
		t.Errorf("download: %q, %q", resp.Header.Get("Content-Disposition"), body)
	}

	if st := admin.do("POST", "/api/v1/nodes/node-0/resume", nil, &node); st != http.StatusOK || node.State != "ready" {
		t.Errorf("resume: status %d, node %+v", st, node)
	}
	b := newBrowser(t, srv.URL)
	b.login("admin", "dev")
	if _, page := b.get("/admin"); !strings.Contains(page, "node.drain") || !strings.Contains(page, "node.resume") {
		t.Errorf("audit log lacks the drain and resume")
	}
}
