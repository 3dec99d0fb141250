package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// faultCheckpointResume measures the work a fault costs a job that
// checkpoints (issue 32), from its trace files: each line names the tick
// the job starts, and the job saves its count every 6 ticks (1.5 s). Its
// agent is killed (SIGKILL) mid-run twice and started again on the same
// work folder: each next run resumes from the checkpoint, so it redoes
// only the ticks after it, at most 6 (and the one under way). Then the
// agent is killed for good and the job lands on another machine, whose
// work folder is not shared: it starts from scratch, and the API says
// so and what it cost.
func faultCheckpointResume(t *testing.T) {
	const ticks, every = 60, 6
	data, traces, work := t.TempDir(), t.TempDir(), t.TempDir()
	srv := faultServer(t, data)
	a := oneGPUAgent(t, srv.URL, "phoenix", "--work-dir", work)
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "checkpointed", "gpus": 1, "command": checkpointedJob(traces, ticks, every)})
	run := traceStarted(t, traces, id, "")
	traceLines(t, traces, run, 14)
	for range 2 {
		a.kill()
		a = oneGPUAgent(t, srv.URL, "phoenix", "--work-dir", work)
		run = traceRunAfter(t, traces, run)
		traceLines(t, traces, run, 9)
	}
	a.kill()
	oneGPUAgent(t, srv.URL, "elsewhere")
	alice.waitState(id, 90*time.Second, "succeeded")
	spans := checkTraces(t, traces)
	endsOnce(t, alice, id)
	if len(spans) != 4 {
		t.Fatalf("the job ran %d times, want 4: %v", len(spans), spans)
	}
	total := 0
	for k, sp := range spans {
		total += sp.lines
		if k == 0 {
			continue
		}
		prev := spans[k-1]
		lost := prev.lastTick - sp.firstTick + 1 // ticks the run traces again
		t.Logf("fault %d: run %d on %s traced ticks %d-%d; run %d on %s starts at tick %d: %d ticks lost (%.2f s)",
			k, prev.run, prev.node, prev.firstTick, prev.lastTick, sp.run, sp.node, sp.firstTick, lost, float64(lost)*tick.Seconds())
		switch {
		case sp.node == "phoenix" && (sp.firstTick == 0 || lost > every+1 || lost < 0):
			t.Errorf("fault %d: run %d starts at tick %d after run %d reached %d: want it resumed from the last checkpoint, at most %d ticks back",
				k, sp.run, sp.firstTick, prev.run, prev.lastTick, every+1)
		case sp.node == "elsewhere" && sp.firstTick != 0:
			t.Errorf("run %d on another machine starts at tick %d; its checkpoint folder is not shared, want 0", sp.run, sp.firstTick)
		}
		if sp.lastTick != ticks-1 && k == len(spans)-1 {
			t.Errorf("the last run ends at tick %d, want %d", sp.lastTick, ticks-1)
		}
	}
	t.Logf("%d ticks traced for a job of %d", total, ticks)

	// What the API says: the last run started from scratch, and what
	// each run resumed from is in the job's history.
	var j struct {
		Resume *struct {
			Run          int64      `json:"run"`
			FromRun      int64      `json:"from_run"`
			CheckpointAt *time.Time `json:"checkpoint_at"`
			LostS        float64    `json:"lost_s"`
			LostTotalS   float64    `json:"lost_total_s"`
		} `json:"resume"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK {
		t.Fatalf("GET job: %d", st)
	}
	if r := j.Resume; r == nil || r.Run != 4 || r.FromRun != 0 || r.CheckpointAt != nil || r.LostS <= 0 || r.LostTotalS < r.LostS {
		t.Errorf("resume = %+v; want run 4 from scratch, some work lost", r)
	} else {
		t.Logf("API: run 4 from scratch, lost %.1f s; all faults %.1f s", r.LostS, r.LostTotalS)
	}
	var resumed []string
	for _, h := range jobHistory(t, alice, id) {
		if strings.HasPrefix(h.Detail, "run ") && strings.Contains(h.Detail, "work lost") {
			resumed = append(resumed, h.Detail)
		}
	}
	if len(resumed) != 3 || !strings.HasPrefix(resumed[0], "run 2 resumed from the checkpoint run 1 wrote") ||
		!strings.HasPrefix(resumed[1], "run 3 resumed from the checkpoint run 2 wrote") || !strings.HasPrefix(resumed[2], "run 4 started from scratch") {
		t.Errorf("history of resumes %q; want runs 2 and 3 resumed from 1 and 2, run 4 from scratch", resumed)
	}
	for _, r := range resumed {
		t.Logf("history: %s", r)
	}
}

// traceRunAfter waits until prev's job traces a later run than prev.
func traceRunAfter(t *testing.T, dir string, prev *runSpan) *runSpan {
	t.Helper()
	var got *runSpan
	eventually(t, 30*time.Second, fmt.Sprintf("job %d to start a run after %d", prev.job, prev.run), func() bool {
		for _, s := range readTraces(t, dir) {
			if s.job == prev.job && s.run > prev.run {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// TestGangRunResumesOnEachPart (issue 32): a job on two machines saves a
// checkpoint on each; preempted and requeued, its next run finds, on each
// part, GPUPORTAL_RESUME=1, the run that wrote the checkpoint and that
// part's own checkpoint folder as the first run left it, and says so.
func TestGangRunResumesOnEachPart(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0", "--thresholds", "3")
	nodes := []string{"gang-a", "gang-b"}
	for _, name := range nodes {
		startAgent(t, srv.URL, name) // 2 GPUs each
	}
	waitGPUs(t, srv.URL, 4)
	alice := newAPI(t, srv.URL, "alice", "dev")
	script := `f="$GPUPORTAL_CHECKPOINT_DIR/saved"
echo "run $GPUPORTAL_RUN on $GPUPORTAL_NODE resume=${GPUPORTAL_RESUME:-no} from=${GPUPORTAL_RESUME_RUN:-none} found=$(cat "$f" 2>/dev/null || echo nothing)"
[ "$GPUPORTAL_RUN" -gt 1 ] && exit 0 # ends before a heartbeat: what it resumed from travels with its exit
echo "run $GPUPORTAL_RUN on $GPUPORTAL_NODE" > "$f"
trap 'exit 143' TERM
while true; do sleep 0.2 & wait $!; done`
	id := submit(t, alice, map[string]any{"name": "gang", "gpus": 4, "command": []string{"sh", "-c", script}})
	alice.waitState(id, 30*time.Second, "running")
	for _, n := range nodes {
		eventually(t, 30*time.Second, "run 1 to save on "+n, func() bool {
			return strings.Contains(remoteOutput(data, n, id), "run 1 on "+n+" resume=no from=none found=nothing")
		})
	}
	alice.waitQueue(id, 30*time.Second, 1) // past 3 GPU-seconds: demoted
	short := submit(t, alice, map[string]any{"name": "newer", "gpus": 4, "sim": map[string]any{"duration_s": 1}})
	alice.waitState(short, 30*time.Second, "succeeded")
	if j := alice.waitState(id, 30*time.Second, "succeeded", "failed"); j.State != "succeeded" || j.Preemptions != 1 {
		t.Fatalf("the gang job ended %s after %d preemptions; want succeeded after 1", j.State, j.Preemptions)
	}
	for _, n := range nodes {
		out := remoteOutput(data, n, id)
		if !strings.Contains(out, "gpuportal: run 2 resumes from the checkpoint run 1 wrote at ") ||
			!strings.Contains(out, "run 2 on "+n+" resume=1 from=1 found=run 1 on "+n+"\n") {
			t.Errorf("the part on %s printed:\n%s\nwant run 2 resumed there from run 1's checkpoint", n, out)
		}
	}
	var j struct {
		Resume *struct {
			Run     int64 `json:"run"`
			FromRun int64 `json:"from_run"`
		} `json:"resume"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK || j.Resume == nil ||
		j.Resume.Run != 2 || j.Resume.FromRun != 1 {
		t.Errorf("the job's resume: %d %+v; want run 2 from run 1", st, j.Resume)
	}
}
