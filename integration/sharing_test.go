package integration

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// gpuLanes is what GET /api/v1/gpus says of one GPU's Salus lanes.
type gpuLanes struct {
	Node  string `json:"node"`
	Index int    `json:"index"`
	Lanes *struct {
		CapacityMiB   int64 `json:"capacity_mib"`
		UsedMiB       int64 `json:"used_mib"`
		PersistentMiB int64 `json:"persistent_mib"`
		Lanes         []struct {
			ID      int   `json:"id"`
			SizeMiB int64 `json:"size_mib"`
			Running int64 `json:"running"`
			Jobs    []struct {
				JobID         int64 `json:"job_id"`
				PersistentMiB int64 `json:"persistent_mib"`
				EphemeralMiB  int64 `json:"ephemeral_mib"`
			} `json:"jobs"`
		} `json:"lanes"`
	} `json:"lanes"`
}

// laneJobs lists the jobs in the GPU's lanes.
func (g gpuLanes) laneJobs() []int64 {
	var ids []int64
	if g.Lanes != nil {
		for _, l := range g.Lanes.Lanes {
			for _, j := range l.Jobs {
				ids = append(ids, j.JobID)
			}
		}
	}
	return ids
}

// Two simulated jobs that opt in to sharing, on a server with one 16 GB
// GPU: the scheduler co-locates them on it, the built-in agent's gate
// admits them to its lanes (too large for a lane each once padded, they
// take turns in one), GET /api/v1/gpus shows both in the GPU's lanes with
// their padded memory, each job's page says whom it shares with, and both
// finish.
func TestSharingJobsShareALane(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x16", "--dev-token", "test-dev-token")
	alice := newAPI(t, srv.URL, "alice", "dev")
	admin := &api{t: t, base: srv.URL, token: "test-dev-token"}

	// P 1000 + E 7000 MiB, padded: P 1100, E 7405. Two lanes would need
	// 17,010 MiB of 16,384; one shared lane needs 9,605.
	var ids []int64
	for i := range 2 {
		var j struct {
			ID      int64 `json:"id"`
			Sharing bool  `json:"sharing"`
		}
		st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{
			"name": fmt.Sprintf("shared-%d", i), "gpus": 1, "sim": map[string]any{"duration_s": 6},
			"sharing": true, "mem_persistent_mib": 1000, "mem_ephemeral_mib": 7000,
		}, &j)
		if st != http.StatusCreated || !j.Sharing {
			t.Fatalf("submit: status %d, %+v", st, j)
		}
		ids = append(ids, j.ID)
	}

	var seen gpuLanes
	eventually(t, 30*time.Second, "both jobs in the GPU's lanes", func() bool {
		var gpus []gpuLanes
		if st := admin.do(http.MethodGet, "/api/v1/gpus", nil, &gpus); st != http.StatusOK {
			t.Fatalf("GET /api/v1/gpus: status %d", st)
		}
		for _, g := range gpus {
			if got := g.laneJobs(); slices.Contains(got, ids[0]) && slices.Contains(got, ids[1]) {
				seen = g
				return true
			}
		}
		return false
	})
	l := seen.Lanes
	if len(l.Lanes) != 1 || l.Lanes[0].SizeMiB != 7405 || l.PersistentMiB != 2200 || l.UsedMiB != 2200+7405 {
		t.Fatalf("lanes %+v: want one lane of 7,405 MiB above 2,200 MiB of persistent memory", l)
	}
	for _, j := range l.Lanes[0].Jobs {
		if j.PersistentMiB != 1100 || j.EphemeralMiB != 7405 {
			t.Fatalf("job %d holds P %d E %d, want the padded 1,100 and 7,405", j.JobID, j.PersistentMiB, j.EphemeralMiB)
		}
	}
	var view struct {
		State string `json:"state"`
		Lane  *struct {
			Node     string  `json:"node"`
			LaneJobs []int64 `json:"lane_jobs"`
		} `json:"lane"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", ids[0]), nil, &view); st != http.StatusOK {
		t.Fatalf("job %d: status %d", ids[0], st)
	}
	if view.State == "running" && (view.Lane == nil || !slices.Equal(view.Lane.LaneJobs, ids[1:])) {
		t.Fatalf("job %d's lane %+v: want it to take turns with job %d", ids[0], view.Lane, ids[1])
	}
	for _, id := range ids {
		alice.waitState(id, 60*time.Second, "succeeded")
	}
	log := jobLog(t, alice, ids[0])
	if !strings.Contains(log, "sharing them") {
		t.Errorf("job %d's output does not say it shared its GPU:\n%s", ids[0], log)
	}
}

// The GPU wall draws the lanes of a GPU that two sharing jobs share, and
// a sharing job's page says which lane it runs in and with whom.
func TestBrowserWallDrawsLanes(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x16")
	alice := newAPI(t, srv.URL, "alice", "dev")
	var ids []int64
	for i := range 2 {
		var j struct {
			ID int64 `json:"id"`
		}
		st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{
			"name": fmt.Sprintf("shared-%d", i), "sim": map[string]any{"duration_s": 60},
			"gpu_fraction": 0.5, "mem_persistent_mib": 1000, "mem_ephemeral_mib": 7000,
		}, &j)
		if st != http.StatusCreated {
			t.Fatalf("submit: status %d", st)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		alice.waitState(id, 30*time.Second, "running")
	}
	ctx := newTab(t)
	err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/login"),
		chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, "admin"),
		chromedp.SendKeys(`input[name=password]`, "dev"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#jobs`),
		chromedp.Navigate(srv.URL+"/cluster"),
		chromedp.WaitVisible(`#gpu-wall .gpu-chart[data-lanes="1"]`),
		chromedp.Sleep(3*time.Second), // a few samples, for the screenshot
	)
	if err != nil {
		t.Fatalf("the GPU wall with its lane: %v", err)
	}
	screenshot(t, ctx, "wall-lanes")
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, ids[0]))); err != nil {
		t.Fatalf("job page: %v", err)
	}
	lane, err := textOf(ctx, `#job-lane`)
	if err != nil {
		t.Fatalf("job page: %v", err)
	}
	if want := fmt.Sprintf("takes turns with job %d", ids[1]); !strings.Contains(lane, want) {
		t.Fatalf("job %d's lane: %q, want %q", ids[0], lane, want)
	}
	screenshot(t, ctx, "job-lane")
}

// A training script on a remote agent uses the Python client: it reports
// an ephemeral peak larger than its lane, the agent's gate stops it, the
// exit carries the larger estimate over the agent protocol, and the job
// goes back to the queue with it, counting no failure. Run again with
// the estimate it measured, it fits its lane and succeeds. The lanes of
// the remote machine reach GET /api/v1/gpus through its heartbeats.
func TestRemoteJobOutgrowsItsLane(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	py := needPython(t)
	clients, err := filepath.Abs(filepath.Join("..", "static", "clients"))
	if err != nil {
		t.Fatal(err)
	}
	srv := startAgentServer(t, "--data", t.TempDir(), "--dev-token", "test-dev-token")
	startAgent(t, srv.URL, "remote-s", "--gpus", "sim:1x1x16")
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	admin := &api{t: t, base: srv.URL, token: "test-dev-token"}
	script := fmt.Sprintf(`import sys, time
sys.path.insert(0, %q)
import gpuportal_gate
gate = gpuportal_gate.connect()
print("gate", gate.enabled, flush=True)
for i in range(8):
    with gate.iteration() as it:
        time.sleep(0.25)
        it.peak_e_mib = 9000
print("done", flush=True)
`, clients)
	// Declared E 4000 MiB: a lane of 4,255 once padded, and the script
	// measures 9,000.
	var j struct {
		ID int64 `json:"id"`
	}
	st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{
		"name": "outgrows", "gpus": 1, "command": []string{py, "-c", script},
		"sharing": true, "mem_persistent_mib": 1000, "mem_ephemeral_mib": 4000,
	}, &j)
	if st != http.StatusCreated {
		t.Fatalf("submit: status %d", st)
	}
	eventually(t, 30*time.Second, "the remote machine's lanes to hold the job", func() bool {
		var gpus []gpuLanes
		admin.do(http.MethodGet, "/api/v1/gpus", nil, &gpus)
		for _, g := range gpus {
			if g.Node == "remote-s" && slices.Contains(g.laneJobs(), j.ID) {
				return true
			}
		}
		// The first run may already be over: the history says so below.
		return alice.job(j.ID).State == "succeeded"
	})
	done := alice.waitState(j.ID, 60*time.Second, "succeeded", "failed")
	var full struct {
		State          string `json:"state"`
		Failures       int    `json:"failures"`
		MemoryEstimate struct {
			PersistentMiB int64  `json:"persistent_mib"`
			EphemeralMiB  int64  `json:"ephemeral_mib"`
			Source        string `json:"source"`
		} `json:"memory_estimate"`
	}
	alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", j.ID), nil, &full)
	if done.State != "succeeded" || full.Failures != 0 {
		t.Fatalf("job %+v: want it succeeded with no failure counted", full)
	}
	if e := full.MemoryEstimate; e.PersistentMiB != 1000 || e.EphemeralMiB != 9000 || e.Source != "measured" {
		t.Fatalf("estimate %+v: want P 1000, E 9000 measured", e)
	}
	var history []struct {
		State  string `json:"state"`
		Detail string `json:"detail"`
	}
	alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/history", j.ID), nil, &history)
	requeued := slices.ContainsFunc(history, func(e struct {
		State  string `json:"state"`
		Detail string `json:"detail"`
	}) bool {
		return e.State == "queued" && strings.HasPrefix(e.Detail, "outgrew its lane: requeued with E=9000 MiB")
	})
	if !requeued {
		t.Fatalf("history %+v: want the requeue with E=9000 MiB", history)
	}
}

// pythonForGate returns a python3 that can import PyTorch where one is
// installed (Debian's python3-torch is CPU-only), else the first
// python3 on the PATH, and whether it has PyTorch. Without any python3
// it skips t, or fails it in CI (CI=true), where scripts/ensure-torch
// installs one.
func pythonForGate(t *testing.T) (py string, torch bool) {
	t.Helper()
	var found []string
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(name); err == nil && !slices.Contains(found, p) {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("no python3: scripts/ensure-torch installs it")
		}
		t.Skip("python3 not found")
	}
	for _, p := range found {
		if exec.Command(p, "-c", "import torch").Run() == nil {
			return p, true
		}
	}
	t.Logf("no python3 here has PyTorch (%v): the job runs without it", found)
	return found[0], false
}

// Issue 15: a training script that asks the gate for 4,096 MiB before
// every iteration (a constant expected_e_mib, as docs/salus.md shows)
// and measures peaks near 1,000 MiB used to run three iterations, have
// its lane shrunk to the padded mean of its peaks, ask for more than the
// lane held, be stopped as "outgrew its lane" and requeued with E=4,096
// again, forever. Now its lane never shrinks below its ask: it runs all
// its iterations in one run and succeeds, with no requeue in its history,
// and its measured estimate covers the ask. With PyTorch installed (CPU
// only), the script also runs an iteration with measure_torch=True,
// which measures nothing there instead of crashing.
func TestAConstantAskRunsWithoutRequeues(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	py, torch := pythonForGate(t)
	clients, err := filepath.Abs(filepath.Join("..", "static", "clients"))
	if err != nil {
		t.Fatal(err)
	}
	srv := startAgentServer(t, "--data", t.TempDir(), "--dev-token", "test-dev-token")
	startAgent(t, srv.URL, "remote-c", "--gpus", "sim:1x1x16")
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	const iterations = 12
	script := fmt.Sprintf(`import sys, time
sys.path.insert(0, %q)
import gpuportal_gate
try:
    import torch
except ImportError:
    torch = None
gate = gpuportal_gate.connect()
print("gate", gate.enabled, "torch", torch is not None, flush=True)
for i in range(%d):
    with gate.iteration(expected_e_mib=4096) as it:
        if torch is not None:
            (torch.randn(128, 128) @ torch.randn(128, 128)).sum()
        time.sleep(0.15)
        it.peak_e_mib = 1000 + 10 * (i %% 3)
    print("iteration", i, "lane", it.lane_mib, flush=True)
if torch is not None:
    with gate.iteration(expected_e_mib=4096, measure_torch=True) as it:
        torch.randn(64, 64).sum()
    print("measure_torch peak", it.peak_e_mib, flush=True)
print("done", flush=True)
`, clients, iterations)
	var j struct {
		ID int64 `json:"id"`
	}
	st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{
		"name": "constant-ask", "gpus": 1, "command": []string{py, "-c", script},
		"sharing": true, "mem_persistent_mib": 1000, "mem_ephemeral_mib": 4096,
	}, &j)
	if st != http.StatusCreated {
		t.Fatalf("submit: status %d", st)
	}
	done := alice.waitState(j.ID, 90*time.Second, "succeeded", "failed", "cancelled")
	admin := &api{t: t, base: srv.URL, token: "test-dev-token"}
	out := jobLog(t, admin, j.ID)
	var full struct {
		State          string `json:"state"`
		Failures       int    `json:"failures"`
		Held           bool   `json:"held"`
		MemoryEstimate struct {
			PersistentMiB int64  `json:"persistent_mib"`
			EphemeralMiB  int64  `json:"ephemeral_mib"`
			Source        string `json:"source"`
		} `json:"memory_estimate"`
	}
	alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", j.ID), nil, &full)
	var history []struct {
		State  string `json:"state"`
		Detail string `json:"detail"`
	}
	alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/history", j.ID), nil, &history)
	if done.State != "succeeded" || full.Failures != 0 || full.Held {
		t.Fatalf("job %+v, history %+v, output:\n%s\nwant it succeeded, no failure, not held", full, history, out)
	}
	runs := 0
	for _, e := range history {
		if e.State == "running" {
			runs++
		}
		if strings.Contains(e.Detail, "outgrew its lane") {
			t.Fatalf("history %+v: requeued for outgrowing its lane", history)
		}
	}
	if runs != 1 {
		t.Fatalf("history %+v: %d runs, want 1", history, runs)
	}
	lines := strings.Split(out, "\n")
	for i := range iterations {
		prefix := fmt.Sprintf("iteration %d lane ", i)
		k := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		if k < 0 {
			t.Fatalf("output has no %q:\n%s", prefix, out)
		}
		var lane int64
		if _, err := fmt.Sscan(strings.TrimPrefix(lines[k], prefix), &lane); err != nil || lane < 4096 {
			t.Fatalf("%q: the lane holds less than the 4,096 MiB asked for", lines[k])
		}
	}
	if !slices.Contains(lines, "done") {
		t.Fatalf("output does not end with done:\n%s", out)
	}
	if torch && !slices.Contains(lines, "measure_torch peak 0") {
		t.Fatalf("measure_torch on a PyTorch without CUDA: output\n%s\nwant a peak of 0 (not measured)", out)
	}
	if e := full.MemoryEstimate; e.PersistentMiB != 1000 || e.EphemeralMiB != 4096 || e.Source != "measured" {
		t.Fatalf("estimate %+v: want P 1000, E 4096 (the ask, above every peak) measured", e)
	}
	t.Logf("python %s (PyTorch %v); output:\n%s", py, torch, out)
}

// A job that asks for more ephemeral memory than its GPU has does not
// loop either: it is stopped at its first ask and requeued once with an
// estimate that covers the ask, and then the gate refuses to admit it,
// too large for the GPU, so its run fails with that reason.
func TestAnImpossibleAskFailsWithItsReason(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	py, _ := pythonForGate(t)
	clients, err := filepath.Abs(filepath.Join("..", "static", "clients"))
	if err != nil {
		t.Fatal(err)
	}
	srv := startAgentServer(t, "--data", t.TempDir(), "--retry-backoff", "1s")
	startAgent(t, srv.URL, "remote-i", "--gpus", "sim:1x1x16")
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	script := fmt.Sprintf(`import sys
sys.path.insert(0, %q)
import gpuportal_gate
gate = gpuportal_gate.connect()
with gate.iteration(expected_e_mib=100000):
    pass
`, clients)
	var j struct {
		ID int64 `json:"id"`
	}
	st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{
		"name": "impossible-ask", "gpus": 1, "command": []string{py, "-c", script},
		"sharing": true, "mem_persistent_mib": 1000, "mem_ephemeral_mib": 4096,
	}, &j)
	if st != http.StatusCreated {
		t.Fatalf("submit: status %d", st)
	}
	done := alice.waitState(j.ID, 60*time.Second, "succeeded", "failed")
	var history []struct {
		State  string `json:"state"`
		Detail string `json:"detail"`
	}
	alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/history", j.ID), nil, &history)
	requeues := 0
	for _, e := range history {
		if e.State == "queued" && strings.HasPrefix(e.Detail, "outgrew its lane") {
			requeues++
			if e.Detail != "outgrew its lane: requeued with E=100000 MiB, P=1000 MiB (on remote-i)" {
				t.Errorf("requeue %q: want it with E=100000 MiB, the ask", e.Detail)
			}
		}
	}
	if done.State != "failed" || requeues != 1 || !strings.Contains(done.Reason, "job larger than the GPU") {
		t.Fatalf("job %+v, history %+v: want it failed, as larger than the GPU, after one requeue", done, history)
	}
}
