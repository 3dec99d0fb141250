package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

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
// work folder is not shared: the server's copy of the checkpoint folder,
// taken from the first machine while the job ran, is restored there
// before the run starts, so it resumes from the last checkpoint copied
// (job/checkpoint.go), and the API, the history and the output say so.
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
	total, redone := 0, 0
	for k, sp := range spans {
		total += sp.lines
		if k == 0 {
			continue
		}
		prev := spans[k-1]
		lost := prev.lastTick - sp.firstTick + 1 // ticks the run traces again
		redone += lost
		t.Logf("fault %d: run %d on %s traced ticks %d-%d; run %d on %s starts at tick %d: %d ticks lost (%.2f s)",
			k, prev.run, prev.node, prev.firstTick, prev.lastTick, sp.run, sp.node, sp.firstTick, lost, float64(lost)*tick.Seconds())
		switch {
		case sp.node == "phoenix" && (sp.firstTick == 0 || lost > every+1 || lost < 0):
			t.Errorf("fault %d: run %d starts at tick %d after run %d reached %d: want it resumed from the last checkpoint, at most %d ticks back",
				k, sp.run, sp.firstTick, prev.run, prev.lastTick, every+1)
		case sp.node == "elsewhere" && (sp.firstTick < every || lost > 3*every+1):
			// The copy is taken once the folder holds still between two
			// readings (a second apart) and may miss the last save or two.
			t.Errorf("run %d on another machine starts at tick %d after run %d reached %d: want it resumed from the server's copy of a checkpoint, at most %d ticks back",
				sp.run, sp.firstTick, prev.run, prev.lastTick, 3*every+1)
		}
		if sp.lastTick != ticks-1 && k == len(spans)-1 {
			t.Errorf("the last run ends at tick %d, want %d", sp.lastTick, ticks-1)
		}
	}
	t.Logf("%d ticks traced for a job of %d", total, ticks)

	// What the API says: the last run resumed from a checkpoint an
	// earlier run wrote on phoenix, and what each run resumed from is in
	// the job's history.
	var j struct {
		Resume *struct {
			Run          int64      `json:"run"`
			FromRun      int64      `json:"from_run"`
			CheckpointAt *time.Time `json:"checkpoint_at"`
			FromNode     string     `json:"from_node"`
			LostS        float64    `json:"lost_s"`
			LostTotalS   float64    `json:"lost_total_s"`
		} `json:"resume"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK {
		t.Fatalf("GET job: %d", st)
	}
	if r := j.Resume; r == nil || r.Run != 4 || r.FromRun < 1 || r.FromRun > 3 || r.CheckpointAt == nil || r.FromNode != "phoenix" || r.LostS <= 0 || r.LostTotalS < r.LostS {
		t.Errorf("resume = %+v; want run 4 from an earlier run's checkpoint, some work lost", r)
	} else {
		t.Logf("API: run 4 from run %d's checkpoint, lost %.1f s; all faults %.1f s", r.FromRun, r.LostS, r.LostTotalS)
		// Each run ended, in the records, when its agent was killed (its
		// connection closed), not when it came back or the job was
		// requeued: what the server says was lost is what the traces
		// show redone, give or take a tick and the save's timing a fault.
		said, traced := time.Duration(r.LostTotalS*float64(time.Second)), time.Duration(redone)*tick
		if slack := 3 * (tick + 500*time.Millisecond); said > traced+slack {
			t.Errorf("the server says the faults lost %v of work; the traces show %v redone (want at most %v more)", said, traced, slack)
		}
	}
	var resumed []string
	for _, h := range jobHistory(t, alice, id) {
		if strings.HasPrefix(h.Detail, "run ") && strings.Contains(h.Detail, "work lost") {
			resumed = append(resumed, h.Detail)
		}
	}
	if len(resumed) != 3 || !strings.HasPrefix(resumed[0], "run 2 resumed from the checkpoint run 1 wrote") ||
		!strings.HasPrefix(resumed[1], "run 3 resumed from the checkpoint run 2 wrote") ||
		!strings.HasPrefix(resumed[2], "run 4 resumed from the checkpoint run ") || !strings.Contains(resumed[2], "on phoenix (the server's copy)") {
		t.Errorf("history of resumes %q; want runs 2 and 3 resumed from 1 and 2, run 4 from the server's copy of phoenix's", resumed)
	}
	for _, r := range resumed {
		t.Logf("history: %s", r)
	}
	out := remoteOutput(data, "elsewhere", id)
	if !strings.Contains(out, "gpuportal: run 4 restored the checkpoint run ") || !strings.Contains(out, " saved on phoenix at ") ||
		!strings.Contains(out, "gpuportal: run 4 resumes from the checkpoint run ") {
		t.Errorf("the output on elsewhere:\n%s\nwant run 4 to say it restored phoenix's checkpoint and resumes from it", out)
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
echo "run $GPUPORTAL_RUN on $GPUPORTAL_NODE saved"
while true; do sleep 0.2 & wait $!; done`
	id := submit(t, alice, map[string]any{"name": "gang", "gpus": 4, "command": []string{"sh", "-c", script}})
	alice.waitState(id, 30*time.Second, "running")
	for _, n := range nodes {
		eventually(t, 30*time.Second, "run 1 to save on "+n, func() bool {
			out := remoteOutput(data, n, id)
			return strings.Contains(out, "run 1 on "+n+" resume=no from=none found=nothing\n") && strings.Contains(out, "run 1 on "+n+" saved\n")
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

// TestCheckpointFollowsPreemptedJob: a job preempted on one machine saves
// its checkpoint as it is stopped (on SIGTERM); its next run lands on
// another machine, whose work folder is not shared, and finds there the
// checkpoint as the first run left it: the server copied the folder as
// the run ended, before it let the job start again, and the new machine
// restored the copy (a 4 MB file and a small one, their write times kept)
// before the run began. The output, the job's history and the API say
// which run's checkpoint it was and on which machine it was saved.
func TestCheckpointFollowsPreemptedJob(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0", "--thresholds", "3")
	startAgent(t, srv.URL, "ck-a") // 2 GPUs each
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	admin := newAPI(t, srv.URL, "admin", "dev")
	script := `d="$GPUPORTAL_CHECKPOINT_DIR"
if [ "${GPUPORTAL_RESUME:-}" = 1 ]; then
  echo "run $GPUPORTAL_RUN on $GPUPORTAL_NODE resumes from run ${GPUPORTAL_RESUME_RUN:-unknown}: $(cat "$d/step") weights=$(md5sum < "$d/weights/w.bin" | cut -c1-32)"
  exit 0
fi
head -c 4194304 /dev/urandom > "$d/.w" && mkdir -p "$d/weights" && mv "$d/.w" "$d/weights/w.bin"
step=0
trap 'echo "saved by run $GPUPORTAL_RUN on $GPUPORTAL_NODE at step $step" > "$d/step"; echo "run $GPUPORTAL_RUN stopped at step $step"; exit 143' TERM
echo "run $GPUPORTAL_RUN weights=$(md5sum < "$d/weights/w.bin" | cut -c1-32)"
while true; do step=$((step+1)); sleep 0.1 & wait $!; done`
	id := submit(t, alice, map[string]any{"name": "moves", "gpus": 2, "command": []string{"sh", "-c", script}})
	alice.waitState(id, 30*time.Second, "running")
	// Its weights written and its trap set (on CI's loaded machine a
	// run stopped 2 s after its start had not got that far, and was
	// killed with nothing saved), it is preempted.
	eventually(t, 30*time.Second, "run 1 to write its weights", func() bool {
		return strings.Contains(remoteOutput(data, "ck-a", id), "run 1 weights=")
	})
	alice.waitQueue(id, 30*time.Second, 1) // past 3 GPU-seconds: demoted

	// A second machine joins, cordoned: the job cannot move there yet.
	startAgent(t, srv.URL, "ck-b")
	waitGPUs(t, srv.URL, 4)
	if st := admin.do(http.MethodPost, "/api/v1/nodes/ck-b/cordon", nil, nil); st != http.StatusOK {
		t.Fatalf("cordon ck-b: %d", st)
	}
	newer := submit(t, alice, map[string]any{"name": "newer", "gpus": 2, "sim": map[string]any{"duration_s": 60}})
	alice.waitState(newer, 30*time.Second, "running")
	alice.waitState(id, 30*time.Second, "queued", "preempted")
	var stopped string
	eventually(t, 30*time.Second, "run 1 to save its checkpoint as it stops", func() bool {
		for _, l := range strings.Split(remoteOutput(data, "ck-a", id), "\n") {
			if strings.HasPrefix(l, "run 1 stopped at step ") {
				stopped = strings.TrimPrefix(l, "run 1 stopped at step ")
				return true
			}
		}
		return false
	})
	weights := ""
	for _, l := range strings.Split(remoteOutput(data, "ck-a", id), "\n") {
		if w, ok := strings.CutPrefix(l, "run 1 weights="); ok {
			weights = w
		}
	}
	if st := admin.do(http.MethodPost, "/api/v1/nodes/ck-b/uncordon", nil, nil); st != http.StatusOK {
		t.Fatalf("uncordon ck-b: %d", st)
	}
	if j := alice.waitState(id, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("the job ended %s", j.State)
	}
	want := fmt.Sprintf("run 2 on ck-b resumes from run 1: saved by run 1 on ck-a at step %s weights=%s\n", stopped, weights)
	var out string
	eventually(t, 30*time.Second, "run 2's output", func() bool {
		out = remoteOutput(data, "ck-b", id)
		return strings.Contains(out, "run 2 on ck-b resumes")
	})
	if !strings.Contains(out, want) || !strings.Contains(out, "gpuportal: run 2 restored the checkpoint run 1 saved on ck-a at ") ||
		!strings.Contains(out, "2 files, 4 MiB") {
		t.Errorf("run 2's output on ck-b:\n%s\nwant it to restore run 1's checkpoint, 2 files of 4 MiB, and find %q", out, want)
	}
	t.Logf("ck-b's output:\n%s", out)
	var j struct {
		Resume *struct {
			Run      int64  `json:"run"`
			FromRun  int64  `json:"from_run"`
			FromNode string `json:"from_node"`
		} `json:"resume"`
		Copies []struct {
			Part  int    `json:"part"`
			Run   int64  `json:"run"`
			Node  string `json:"node"`
			Bytes int64  `json:"bytes"`
		} `json:"checkpoint_copies"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK || j.Resume == nil ||
		j.Resume.Run != 2 || j.Resume.FromRun != 1 || j.Resume.FromNode != "ck-a" {
		t.Errorf("the job's resume: %d %+v; want run 2 from run 1's checkpoint on ck-a", st, j.Resume)
	}
	if len(j.Copies) != 1 || j.Copies[0].Part != 0 || j.Copies[0].Run != 1 || j.Copies[0].Node != "ck-a" || j.Copies[0].Bytes < 4<<20 {
		t.Errorf("the job's checkpoint copies: %+v; want run 1's from ck-a, 4 MiB or more", j.Copies)
	}
	// /metrics counts the copies: at least the one of the last save,
	// sent once; the job has not been swept yet, so its copy is kept.
	m := scrape(t, srv.URL)
	if m.get(`gpuportal_checkpoint_copies_total{result="copied"}`) < 1 || m.get(`gpuportal_checkpoint_restores_total`) != 1 ||
		m.get(`gpuportal_checkpoint_copied_bytes_total`) < 4<<20 || m.get(`gpuportal_checkpoint_copies_kept`) != 1 ||
		m.get(`gpuportal_checkpoint_copies_kept_bytes`) < 4<<20 {
		t.Errorf("/metrics of the copies: copied %v, failed %v, bytes %v, restores %v, kept %v (%v bytes); want at least 1 of 4 MiB, 1 restore, 1 kept",
			m.get(`gpuportal_checkpoint_copies_total{result="copied"}`), m.get(`gpuportal_checkpoint_copies_total{result="failed"}`),
			m.get(`gpuportal_checkpoint_copied_bytes_total`), m.get(`gpuportal_checkpoint_restores_total`),
			m.get(`gpuportal_checkpoint_copies_kept`), m.get(`gpuportal_checkpoint_copies_kept_bytes`))
	}
	found := false
	for _, h := range jobHistory(t, alice, id) {
		found = found || strings.HasPrefix(h.Detail, "run 2 resumed from the checkpoint run 1 wrote at ") && strings.Contains(h.Detail, " on ck-a (the server's copy)")
	}
	if !found {
		t.Errorf("the job's history does not say run 2 resumed from the server's copy of run 1's checkpoint on ck-a")
	}

	// The job's page, as its owner sees it: the history says where the
	// checkpoint came from; the checkpoints listed are ck-b's, restored.
	ctx, sc := screensAs(t, srv.URL, "alice")
	for _, vp := range viewports {
		sc.visit(t, vp, fmt.Sprintf("/jobs/%d", id), "#job-checkpoints table", "checkpoint-moved")
		history, err := readFirst(ctx, "#job-history", "e.innerText")
		if err != nil || !strings.Contains(history, "run 2 resumed from the checkpoint run 1 wrote at ") || !strings.Contains(history, "on ck-a (the server's copy)") {
			t.Errorf("job page at %s: history %q, %v; want run 2 resumed from the server's copy of ck-a's", vp.name, history, err)
		}
		listed, err := readFirst(ctx, "#job-checkpoints", "e.innerText")
		if err != nil || !strings.Contains(listed, "step") || !strings.Contains(listed, "weights") ||
			!strings.Contains(listed, "The server keeps a copy, for a run on another machine to resume from: saved ") ||
			!strings.Contains(listed, " by run 1 on ck-a, 4 MiB") {
			t.Errorf("job page at %s: checkpoints %q, %v; want step and weights, restored on ck-b, and the server's copy of run 1's", vp.name, listed, err)
		}
		if log, err := readFirst(ctx, "#job-log", "e.innerText"); err != nil || !strings.Contains(log, "run 2 on ck-b resumes from run 1") {
			t.Errorf("job page at %s: output %q, %v; want the last run's, on ck-b", vp.name, log, err)
		}
	}
}

// faultCheckpointCopiedAcrossServerRestart: the server is killed while a
// checkpointing job runs and is back before the heartbeat timeout, so the
// run goes on; the new server, which never started the run, still copies
// its checkpoints as they change (it learns the run from the agent and
// its account from the store). Then the job's machine is killed for good:
// the job resumes on another machine from a checkpoint saved after the
// restart, as its trace shows.
func faultCheckpointCopiedAcrossServerRestart(t *testing.T) {
	const ticks, every = 60, 6
	data, traces := t.TempDir(), t.TempDir()
	args := []string{"--data", data, "--heartbeat-timeout", "10s", "--grace", faultGrace, "--max-retries", "0", "--policy", "fifo"}
	srv := startAgentServer(t, args...)
	a := oneGPUAgent(t, srv.URL, "before")
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "checkpointed", "gpus": 1, "command": checkpointedJob(traces, ticks, every)})
	run := traceStarted(t, traces, id, "")
	traceLines(t, traces, run, 8)

	srv.kill()
	restarted := time.Now()
	srv = startAgentServerAt(t, srv, args...)
	alice = newAPI(t, srv.URL, "alice", "dev")
	c := waitCopySavedAfter(t, data, id, restarted, "the restart")
	if c.Run != 1 {
		t.Errorf("the copy says run %d wrote it, want 1 (the run that ran across the restart)", c.Run)
	}
	reached := lastTick(t, traces, id)
	a.kill()
	oneGPUAgent(t, srv.URL, "after")
	alice.waitState(id, 90*time.Second, "succeeded")
	spans := checkTraces(t, traces)
	endsOnce(t, alice, id)
	if len(spans) != 2 || spans[0].run != 1 || spans[1].node != "after" {
		t.Fatalf("runs %v; want run 1 on before, then one on after", spans)
	}
	first, second := spans[0], spans[1]
	t.Logf("run 1 traced ticks %d-%d across the restart (tick %d when the copy was seen); run %d on after starts at tick %d: %d ticks redone",
		first.firstTick, first.lastTick, reached, second.run, second.firstTick, first.lastTick-second.firstTick+1)
	if second.firstTick < every || second.firstTick > first.lastTick {
		t.Errorf("run %d on after starts at tick %d after run 1 reached %d: want it resumed from a checkpoint the server copied after its restart",
			second.run, second.firstTick, first.lastTick)
	}
}

// TestCheckpointRestoredAsTheJobsOwner: under agent --run-as owner, the
// server's copy of a job's checkpoint is read on the first machine and
// restored on the second as the job's owner's Unix account: the files the
// next run finds are that account's, private as it left them, and the
// folder around them too. The first machine is killed mid-run.
func TestCheckpointRestoredAsTheJobsOwner(t *testing.T) {
	needRootAccounts(t)
	t.Parallel() // waits on the binary and the clock: see TestMain
	unixGroup(t, "gpt-lab")
	owner := unixUser(t, "gpt-alice", "gpt-lab")
	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--heartbeat-timeout", faultTimeout, "--grace", faultGrace, "--max-retries", "0")
	first := startAgent(t, srv.URL, "own-a", "--run-as", "owner", "--work-dir", passableDir(t), "--gpus", "sim:1x1x80")
	waitGPUs(t, srv.URL, 1)
	alice := portalUser(t, srv.URL, data, "gpt-alice")
	script := `d="$GPUPORTAL_CHECKPOINT_DIR"
if [ "${GPUPORTAL_RESUME:-}" = 1 ]; then
  echo "run $GPUPORTAL_RUN as $(id -un) found: $(cat "$d/state") mode $(stat -c %a "$d/state") owner $(stat -c %U "$d/state") folder $(stat -c %U:%a "$d")"
  exit 0
fi
umask 077
echo "saved by run $GPUPORTAL_RUN as $(id -un)" > "$d/state"
echo saved
while true; do sleep 0.2 & wait $!; done`
	id := submit(t, alice, map[string]any{"name": "owned", "gpus": 1, "command": []string{"sh", "-c", script}})
	eventually(t, 30*time.Second, "run 1 to save", func() bool { return strings.Contains(remoteOutput(data, "own-a", id), "saved\n") })
	eventually(t, 30*time.Second, "the server to copy the checkpoint", func() bool {
		_, err := os.Stat(filepath.Join(data, "checkpoints", fmt.Sprintf("%d-0.tar.gz", id)))
		return err == nil
	})
	work := passableDir(t)
	first.kill()
	startAgent(t, srv.URL, "own-b", "--run-as", "owner", "--work-dir", work, "--gpus", "sim:1x1x80")
	if j := alice.waitState(id, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("the job ended %s", j.State)
	}
	var out string
	eventually(t, 30*time.Second, "run 2's output on own-b", func() bool {
		out = remoteOutput(data, "own-b", id)
		return strings.Contains(out, "run 2 as ")
	})
	want := "run 2 as gpt-alice found: saved by run 1 as gpt-alice mode 600 owner gpt-alice folder gpt-alice:700\n"
	if !strings.Contains(out, want) || !strings.Contains(out, "gpuportal: run 2 restored the checkpoint run 1 saved on own-a") {
		t.Errorf("run 2's output on own-b:\n%s\nwant %q", out, want)
	}
	st, err := os.Stat(filepath.Join(work, "jobs", fmt.Sprint(id), "checkpoint", "state"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fmt.Sprint(st.Sys().(*syscall.Stat_t).Uid); uid != owner.Uid {
		t.Errorf("the restored file belongs to uid %s, want gpt-alice's %s", uid, owner.Uid)
	}
}

// faultCheckpointCopiedDuringDatabaseOutage: the database stops while a
// checkpointed job runs, and the server, fenced, goes on copying its saves:
// a copy needs the agent and the server's own disk, not the database. The
// job's machine is killed while the database is still out; once it is
// back, the job lands on another machine and resumes there from a save
// copied during the outage, not from scratch and not from the last copy
// before it.
func faultCheckpointCopiedDuringDatabaseOutage(t *testing.T) {
	const ticks, every = 100, 6
	pg := startPrivatePG(t)
	data, traces := t.TempDir(), t.TempDir()
	srv := faultServer(t, data, "--db", pg.DSN())
	a := oneGPUAgent(t, srv.URL, "before")
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "checkpointed", "gpus": 1, "command": checkpointedJob(traces, ticks, every)})
	run := traceStarted(t, traces, id, "")
	traceLines(t, traces, run, 4)

	pg.stop()
	stopped := time.Now()
	reachedAtStop := lastTick(t, traces, id)
	waitCopySavedAfter(t, data, id, stopped, "the database stopped")
	a.kill()
	killed := time.Now()
	reached := lastTick(t, traces, id)
	// The outage outlasts the heartbeat timeout after the kill: the
	// machine is lost while nothing can be recorded.
	time.Sleep(5 * time.Second)
	pg.start()
	t.Logf("database out for %v; the machine killed %v into it, at tick %d (tick %d when the database stopped)",
		time.Since(stopped).Round(100*time.Millisecond), killed.Sub(stopped).Round(100*time.Millisecond), reached, reachedAtStop)
	oneGPUAgent(t, srv.URL, "after")
	alice.waitState(id, 120*time.Second, "succeeded")
	spans := checkTraces(t, traces)
	endsOnce(t, alice, id)
	if len(spans) != 2 || spans[0].node != "before" || spans[1].node != "after" {
		t.Fatalf("runs %v; want one on before, then one on after", spans)
	}
	first, second := spans[0], spans[1]
	// The first save the job wrote after the database stopped.
	firstSaveAfter := (reachedAtStop/every + 1) * every
	t.Logf("run %d traced ticks %d-%d; run %d on after starts at tick %d: %d ticks redone",
		first.run, first.firstTick, first.lastTick, second.run, second.firstTick, first.lastTick-second.firstTick+1)
	if second.firstTick < firstSaveAfter || second.firstTick > first.lastTick {
		t.Errorf("run %d starts at tick %d after run %d reached %d; want it resumed from a save copied during the outage (tick %d or later)",
			second.run, second.firstTick, first.run, first.lastTick, firstSaveAfter)
	}
	var j struct {
		Resume *struct {
			FromRun  int64   `json:"from_run"`
			FromNode string  `json:"from_node"`
			LostS    float64 `json:"lost_s"`
		} `json:"resume"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK {
		t.Fatalf("job %d: status %d", id, st)
	}
	if j.Resume == nil || j.Resume.FromRun != first.run || j.Resume.FromNode != "before" {
		t.Fatalf("the job's resume = %+v; want from run %d on before", j.Resume, first.run)
	}
	// The work lost, as the server says it, counts up to the machine's
	// loss, not the outage that kept the server from recording it: the
	// ticks redone, and at most a heartbeat timeout and a second more (a
	// save is dated by its file, the loss by the server's clock).
	redone := time.Duration(first.lastTick-second.firstTick+1) * tick
	timeout, _ := time.ParseDuration(faultTimeout)
	lost := time.Duration(j.Resume.LostS * float64(time.Second))
	t.Logf("the server says the resume lost %v of work; the traces show %v redone", lost.Round(10*time.Millisecond), redone)
	if lost > redone+timeout+time.Second {
		t.Errorf("lost_s %v; want at most %v (the ticks redone, a heartbeat timeout and a second): the outage counted as work lost", lost, redone+timeout+time.Second)
	}

	// The job's page, as its owner sees it, says the same as the API's
	// history: the machine lost, and the resume with its work lost.
	var said []string
	for _, h := range jobHistory(t, alice, id) {
		if strings.Contains(h.Detail, "lost") {
			said = append(said, h.Detail)
		}
	}
	if len(said) != 2 {
		t.Fatalf("history lines saying what was lost: %q; want the requeue and the resume", said)
	}
	ctx, sc := screensAs(t, srv.URL, "alice")
	for _, vp := range viewports {
		sc.visit(t, vp, fmt.Sprintf("/jobs/%d", id), "#job-history", "lost-during-outage")
		history, err := readFirst(ctx, "#job-history", "e.innerText")
		for _, line := range said {
			if err != nil || !strings.Contains(history, line) {
				t.Errorf("job page at %s: history %q, %v; want %q, as the API says", vp.name, history, err, line)
			}
		}
	}
}

// keptCopy is what the server's description of its copy of a job's
// checkpoint (DATA/checkpoints/JOB-PART.json) says.
type keptCopy struct {
	Run int64     `json:"run"`
	At  time.Time `json:"at"`
}

// waitCopySavedAfter waits until the server in data keeps a copy of job
// id's checkpoint (its part 0) saved after after, when what, and returns
// its description.
func waitCopySavedAfter(t *testing.T, data string, id int64, after time.Time, what string) keptCopy {
	t.Helper()
	var c keptCopy
	eventually(t, 30*time.Second, "a copy of a checkpoint saved after "+what, func() bool {
		b, err := os.ReadFile(filepath.Join(data, "checkpoints", fmt.Sprintf("%d-0.json", id)))
		return err == nil && json.Unmarshal(b, &c) == nil && c.At.After(after)
	})
	return c
}

// lastTick is the last tick job id's trace shows so far, or -1.
func lastTick(t *testing.T, traces string, id int64) int {
	t.Helper()
	last := -1
	for _, sp := range readTraces(t, traces) {
		if sp.job == id {
			last = max(last, sp.lastTick)
		}
	}
	return last
}

// faultCheckpointCopyDiskFull fills the server's data disk (a small tmpfs)
// while a job saves a new checkpoint: the copy fails (the metrics say so),
// leaving the copy before as it was and nothing half written beside it;
// once space returns, the next reading copies the new save.
func faultCheckpointCopyDiskFull(t *testing.T) {
	data, traces := smallDisk(t, 64), t.TempDir()
	srv := faultServer(t, data)
	oneGPUAgent(t, srv.URL, "df")
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	go2 := filepath.Join(traces, "save-again")
	script := fmt.Sprintf(`d="$GPUPORTAL_CHECKPOINT_DIR"
echo v1 > "$d/state"
while [ ! -e %s ]; do sleep 0.1; done
head -c 8388608 /dev/urandom > "$d/.w" && mv "$d/.w" "$d/weights.bin" && echo v2 > "$d/state"
echo saved again
while true; do sleep 0.2 & wait $!; done`, go2)
	id := submit(t, alice, map[string]any{"name": "full", "gpus": 1, "command": []string{"sh", "-c", script}})
	meta := filepath.Join(data, "checkpoints", fmt.Sprintf("%d-0.json", id))
	type copied struct {
		At    time.Time `json:"at"`
		Bytes int64     `json:"bytes"`
	}
	read := func() (c copied) {
		b, err := os.ReadFile(meta)
		if err == nil {
			_ = json.Unmarshal(b, &c)
		}
		return c
	}
	var first copied
	eventually(t, 30*time.Second, "the first save copied", func() bool { first = read(); return !first.At.IsZero() })
	arc, err := os.ReadFile(strings.TrimSuffix(meta, ".json") + ".tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	filler := fill(t, data)
	if err := os.WriteFile(go2, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a copy of the new save to fail on the full disk", func() bool {
		return scrape(t, srv.URL).get(`gpuportal_checkpoint_copies_total{result="failed"}`) >= 1
	})
	if got := read(); !got.At.Equal(first.At) {
		t.Errorf("the copy kept says it was written %v, want the first save's %v", got.At, first.At)
	}
	if now, err := os.ReadFile(strings.TrimSuffix(meta, ".json") + ".tar.gz"); err != nil || !bytes.Equal(now, arc) {
		t.Errorf("the first save's copy changed on the full disk (%v)", err)
	}
	if left, _ := filepath.Glob(filepath.Join(data, "checkpoints", ".copy-*")); len(left) > 0 {
		t.Errorf("half-written copies left on the full disk: %v", left)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the new save copied once space returned", func() bool {
		c := read()
		return c.At.After(first.At) && c.Bytes >= 8<<20
	})
	m := scrape(t, srv.URL)
	t.Logf("copies: %v made, %v failed on the full disk", m.get(`gpuportal_checkpoint_copies_total{result="copied"}`), m.get(`gpuportal_checkpoint_copies_total{result="failed"}`))
	if st := alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil); st != http.StatusOK {
		t.Fatalf("cancel: %d", st)
	}
	alice.waitState(id, 30*time.Second, "cancelled")
}

// faultGangMovesWithItsCheckpoints: a job on two machines saves a
// checkpoint on each; both machines are killed and the job lands on two
// others, whose work folders are not shared: each rank finds there what
// that rank saved, not the other's.
func faultGangMovesWithItsCheckpoints(t *testing.T) {
	data := t.TempDir()
	srv := faultServer(t, data)
	first := []*server{oneGPUAgent(t, srv.URL, "gm-a"), oneGPUAgent(t, srv.URL, "gm-b")}
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	script := `d="$GPUPORTAL_CHECKPOINT_DIR"
if [ "${GPUPORTAL_RESUME:-}" = 1 ]; then echo "rank $NODE_RANK of run $GPUPORTAL_RUN on $GPUPORTAL_NODE found: $(cat "$d/state")"; exit 0; fi
echo "rank $NODE_RANK on $GPUPORTAL_NODE" > "$d/state"
echo saved
while true; do sleep 0.2 & wait $!; done`
	id := submit(t, alice, map[string]any{"name": "gang", "gpus": 2, "command": []string{"sh", "-c", script}})
	for _, n := range []string{"gm-a", "gm-b"} {
		eventually(t, 30*time.Second, "the part on "+n+" to save", func() bool { return strings.Contains(remoteOutput(data, n, id), "saved\n") })
	}
	eventually(t, 30*time.Second, "both ranks' copies", func() bool {
		n := 0
		for _, part := range []int{0, 1} {
			if _, err := os.Stat(filepath.Join(data, "checkpoints", fmt.Sprintf("%d-%d.json", id, part))); err == nil {
				n++
			}
		}
		return n == 2
	})
	for _, a := range first {
		a.kill()
	}
	oneGPUAgent(t, srv.URL, "gm-c")
	oneGPUAgent(t, srv.URL, "gm-d")
	if j := alice.waitState(id, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("the job ended %s", j.State)
	}
	for _, n := range []string{"gm-c", "gm-d"} {
		var out string
		eventually(t, 30*time.Second, "the output on "+n, func() bool {
			out = remoteOutput(data, n, id)
			return strings.Contains(out, " found: ")
		})
		i := strings.Index(out, "rank ")
		line := strings.TrimSpace(out[i:])
		var rank, run int
		var node, savedNode string
		var savedRank int
		if _, err := fmt.Sscanf(line, "rank %d of run %d on %s found: rank %d on %s", &rank, &run, &node, &savedRank, &savedNode); err != nil || rank != savedRank || node != n {
			t.Errorf("on %s: %q (%v); want its rank to find that rank's own save", n, line, err)
		} else {
			t.Logf("on %s: rank %d found rank %d's save from %s", n, rank, savedRank, savedNode)
		}
	}
}
