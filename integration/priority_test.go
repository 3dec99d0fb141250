package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBatchPriorities: an admin lets team vision use high priority, with
// at most 1 GPU of it; on the one simulated GPU, held by alice's job,
// her normal job, then her low-priority one (the CLI's --priority), then
// a high-priority one (an sbatch script's --qos) wait; when the GPU
// frees, the high-priority job starts first, and the low-priority job
// says it waits behind her normal one. A second high-priority job past
// the cap is refused naming the flag; bob's team does not allow high.
// (The low-priority job, which the high-priority one passed, names it.)
func TestBatchPriorities(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80")
	admin := newAPI(t, srv.URL, "admin", "dev")
	alice := newAPI(t, srv.URL, "alice", "dev")
	lead := newAPI(t, srv.URL, "lead", "dev")
	policy := map[string]any{"priorities": []string{"high", "normal", "low"}, "high_gpus": 1}
	if st := lead.do(http.MethodPut, "/api/v1/teams/vision/batch-policy", policy, nil); st != http.StatusForbidden {
		t.Errorf("a lead sets the batch policy: status %d, want 403", st)
	}
	var team struct {
		BatchPolicy struct {
			Priorities []string `json:"priorities"`
			HighGPUs   int      `json:"high_gpus"`
		} `json:"batch_policy"`
	}
	if st := admin.do(http.MethodPut, "/api/v1/teams/vision/batch-policy", policy, &team); st != http.StatusOK ||
		strings.Join(team.BatchPolicy.Priorities, ",") != "high,normal,low" || team.BatchPolicy.HighGPUs != 1 {
		t.Fatalf("set vision's batch policy: status %d, %+v", st, team.BatchPolicy)
	}
	var e struct{ Error string }
	if st := admin.malformed().do(http.MethodPut, "/api/v1/teams/vision/batch-policy", map[string]any{"priorities": []string{"urgent"}, "high_gpus": 0}, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, "priorities") {
		t.Errorf("an unknown priority: status %d %q, want 400 naming priorities", st, e.Error)
	}

	holder := submit(t, alice, map[string]any{"name": "holder", "gpus": 1, "sim": map[string]any{"duration_s": 3600}})
	waitJob(t, alice, holder, 15*time.Second, "running")
	normal := submit(t, alice, map[string]any{"name": "normal", "gpus": 1, "sim": map[string]any{"duration_s": 600}})

	c := newCLI(t, srv.URL)
	env := []string{"GPUPORTAL_TOKEN=" + alice.token}
	low := strings.TrimSpace(c.ok(env, "job", "submit", "--parsable", "--name", "low", "--priority", "low", "--sim-duration", "10m"))
	script := filepath.Join(t.TempDir(), "urgent.sbatch")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n#SBATCH --job-name=urgent\n#SBATCH --qos=high\n#SBATCH --gres=gpu:1\nsleep 600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	high := strings.TrimSpace(c.ok(env, "sbatch", "--parsable", script))
	var hj struct {
		Priority string `json:"priority"`
	}
	alice.do(http.MethodGet, "/api/v1/jobs/"+high, nil, &hj)
	if hj.Priority != "high" {
		t.Fatalf("the sbatch script's job has priority %q, want high", hj.Priority)
	}
	c.fails(env, []string{"--priority", "may ask for 1 GPUs at once; 1 are asked for already"}, "job", "submit", "--name", "second", "--priority", "high", "--sim-duration", "1m")
	bob := newAPI(t, srv.URL, "bob", "dev")
	if st := bob.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "b", "gpus": 1, "priority": "high", "sim": map[string]any{"duration_s": 60}}, &e); st != http.StatusBadRequest ||
		!strings.Contains(e.Error, "team nlp allows its jobs normal or low priority, not high") {
		t.Errorf("bob's high-priority job: status %d %q", st, e.Error)
	}

	if st := alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", holder), nil, nil); st != http.StatusOK && st != http.StatusAccepted {
		t.Fatalf("cancel the holder: status %d", st)
	}
	eventually(t, 15*time.Second, "the high-priority job running first", func() bool {
		var j jobView
		alice.do(http.MethodGet, "/api/v1/jobs/"+high, nil, &j)
		return j.State == "running"
	})
	if j := alice.job(normal); j.State != "queued" {
		t.Errorf("the normal job is %s, want queued behind the high-priority one", j.State)
	}
	// Once the high-priority job runs, only the normal one is ahead.
	want := fmt.Sprintf("behind alice's job %s: a low-priority job waits behind its team's other jobs; 1 job ahead", high)
	var lj jobView
	eventually(t, 15*time.Second, "the low-priority job saying it waits behind its team's jobs", func() bool {
		lj = jobView{}
		alice.do(http.MethodGet, "/api/v1/jobs/"+low, nil, &lj)
		return lj.State == "queued" && strings.Contains(lj.Reason, want)
	})
	if out := c.ok(env, "job", "show", low); !strings.Contains(out, "priority") || !strings.Contains(out, "low") {
		t.Errorf("job show of the low-priority job:\n%s", out)
	}
	ab := newBrowser(t, srv.URL)
	ab.login("alice", "dev")
	if _, body := ab.get("/jobs/" + high); !strings.Contains(body, `id="job-priority"`) || !strings.Contains(body, "high: ahead of its team") {
		t.Errorf("the job page does not show the high priority")
	}
	if _, body := ab.get("/teams/vision"); !strings.Contains(body, `data-field="priorities">high, normal, low<`) || !strings.Contains(body, `data-field="high_gpus">1<`) {
		t.Errorf("the team page does not show vision's batch priorities")
	}
}
