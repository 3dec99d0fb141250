package web

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
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

// TestJobLogOfEachMachine: a job on two machines (gone now: the server's
// copies) shows its first machine's output, its rank 0's, by default,
// each machine's with ?node=, on the API, the download and the page,
// whose links name each machine; a machine it did not run on is refused
// naming the parameter and the job's machines.
func TestJobLogOfEachMachine(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.cfg.DataDir = t.TempDir()
	now := time.Now()
	j := &models.Job{Name: "ddp", Team: "vision", User: "alice", GPUs: 4, SimDuration: 60, SubmittedAt: now, StartedAt: &now,
		Placement: models.Strings{"gpu-b:0", "gpu-b:1", "gpu-a:0", "gpu-a:1"}}
	if err := ts.store.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	for node, out := range map[string]string{"gpu-a": "rank 1 done\n", "gpu-b": "rank 0: loss 0.5\n"} {
		dir := filepath.Join(ts.cfg.DataDir, "agents", node, "jobs", fmt.Sprint(j.ID))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "output.log"), []byte(out), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		target string
		code   int
		body   string
	}{
		{fmt.Sprintf("/api/v1/jobs/%d/logs", j.ID), http.StatusOK, "rank 0: loss 0.5"},
		{fmt.Sprintf("/api/v1/jobs/%d/logs?node=gpu-a", j.ID), http.StatusOK, "rank 1 done"},
		{fmt.Sprintf("/api/v1/jobs/%d/logs?node=gpu-b&download=1", j.ID), http.StatusOK, "rank 0: loss 0.5"},
		{fmt.Sprintf("/api/v1/jobs/%d/logs?node=gpu-a&offset=5", j.ID), http.StatusOK, "1 done"},
		{fmt.Sprintf("/api/v1/jobs/%d/logs?node=gpu-c", j.ID), http.StatusBadRequest, `node: job ` + fmt.Sprint(j.ID) + ` runs (or ran last) on gpu-b, gpu-a, not \"gpu-c\"`},
		{fmt.Sprintf("/api/v1/jobs/%d/logs?node=..%%2Fgpu-a", j.ID), http.StatusBadRequest, "node:"},
		{fmt.Sprintf("/jobs/%d", j.ID), http.StatusOK, "rank 0: loss 0.5"},
		{fmt.Sprintf("/jobs/%d", j.ID), http.StatusOK, fmt.Sprintf(`href="/jobs/%d/logs?node=gpu-a&amp;download=1"`, j.ID)},
		{fmt.Sprintf("/jobs/%d/logs?node=gpu-a&download=1", j.ID), http.StatusOK, "rank 1 done"},
	} {
		rec := ts.do(t, "alice", http.MethodGet, tc.target, "")
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s: %d %.300s; want %d with %q", tc.target, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
	if rec := ts.do(t, "bob", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/logs?node=gpu-a", j.ID), ""); rec.Code != http.StatusNotFound {
		t.Errorf("another team's member: %d, want 404", rec.Code)
	}
}

// TestJobLogAfterAMove: a job whose last run was on gpu-b, after an
// earlier one on gpu-a (the name that sorts first), shows gpu-b's output
// by default, on the API and the page.
func TestJobLogAfterAMove(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.cfg.DataDir = t.TempDir()
	now := time.Now()
	j := &models.Job{Name: "moved", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: now, StartedAt: &now,
		Placement: models.Strings{"gpu-b:0"}}
	if err := ts.store.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	for node, out := range map[string]string{"gpu-a": "run 1 stopped at step 17\n", "gpu-b": "run 2 resumes at step 17\n"} {
		dir := filepath.Join(ts.cfg.DataDir, "agents", node, "jobs", fmt.Sprint(j.ID))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "output.log"), []byte(out), 0o640); err != nil {
			t.Fatal(err)
		}
		if node == "gpu-a" {
			// The earlier machine's copy is the newer file (its agent
			// sent the rest of the output late).
			later := now.Add(time.Minute)
			if err := os.Chtimes(filepath.Join(dir, "output.log"), later, later); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, target := range []string{fmt.Sprintf("/api/v1/jobs/%d/logs", j.ID), fmt.Sprintf("/jobs/%d", j.ID)} {
		rec := ts.do(t, "alice", http.MethodGet, target, "")
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "run 2 resumes at step 17") || strings.Contains(rec.Body.String(), "run 1 stopped") {
			t.Errorf("%s: %d %.300s; want gpu-b's output, the last run's", target, rec.Code, rec.Body.String())
		}
	}
}

func TestCopyLines(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 23, 35, 500, time.UTC)
	for _, tc := range []struct {
		name   string
		copies []api.CheckpointCopy
		want   string
	}{
		{"none", nil, ""},
		{"one machine", []api.CheckpointCopy{{Run: 1, Node: "ck-a", WrittenAt: at, Bytes: 4 << 20}}, "saved 2026-11-30 08:23:35 UTC by run 1 on ck-a, 4 MiB"},
		{"writer not known", []api.CheckpointCopy{{Node: "ck-a", WrittenAt: at, Bytes: 10}}, "saved 2026-11-30 08:23:35 UTC on ck-a, 10 B"},
		{"two parts", []api.CheckpointCopy{{Part: 0, Run: 2, Node: "a", WrittenAt: at, Bytes: 1 << 30}, {Part: 1, Run: 2, Node: "b", WrittenAt: at, Bytes: 1 << 30}},
			"rank 0: saved 2026-11-30 08:23:35 UTC by run 2 on a, 1 GiB; rank 1: saved 2026-11-30 08:23:35 UTC by run 2 on b, 1 GiB"},
	} {
		if got := strings.Join(copyLines(tc.copies), "; "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
