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

// TestPreemptedJobResumesFromCheckpoint runs a real process that counts
// steps into its checkpoint folder; a newer job preempts it (tiresias-l
// with a tiny first queue), and when it runs again it picks up where it
// stopped instead of starting over.
func TestPreemptedJobResumesFromCheckpoint(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data := t.TempDir()
	srv := startServer(t, "--data", data, "--sim-gpus", "1x1x80", "--thresholds", "3", "--grace", "2s")
	a := newAPI(t, srv.URL, "alice", "dev")
	// Twenty steps of 0.5s; each finished step is saved; SIGTERM saves and exits.
	script := `f="$GPUPORTAL_CHECKPOINT_DIR/step"; i=$(cat "$f" 2>/dev/null || echo 0)
echo "start at step $i"
trap 'echo "$i" > "$f"; echo "saved at step $i"; exit 143' TERM
while [ "$i" -lt 20 ]; do sleep 0.5 & wait $!; i=$((i+1)); echo "$i" > "$f"; echo "reached $i"; done
echo "done at step $i"`
	var long jobView
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "counter", "gpus": 1, "command": []string{"sh", "-c", script}}, &long); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	a.waitState(long.ID, 30*time.Second, "running")
	// GPU-seconds count from the run's start as the server sees it: on a
	// loaded machine the shell may not have counted a step by the
	// demotion. Preempt it once it has, so that there is one to resume.
	eventually(t, 30*time.Second, "the counter to reach step 1", func() bool {
		return strings.Contains(remoteOutput(data, "node-0", long.ID), "reached 1\n")
	})
	a.waitQueue(long.ID, 30*time.Second, 1) // past 3 GPU-seconds: demoted
	var short jobView
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "short", "gpus": 1, "sim": map[string]any{"duration_s": 1}}, &short); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	a.waitState(short.ID, 30*time.Second, "succeeded")
	done := a.waitState(long.ID, 60*time.Second, "succeeded")
	if done.Preemptions != 1 {
		t.Errorf("preemptions = %d, want 1", done.Preemptions)
	}
	out, err := os.ReadFile(filepath.Join(data, "agents", "node-0", "jobs", fmt.Sprint(long.ID), "output.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(out)
	if !strings.Contains(log, "start at step 0") || !strings.Contains(log, "saved at step") || !strings.Contains(log, "done at step 20") ||
		strings.Count(log, "start at step 0") != 1 {
		t.Errorf("output does not show a resume from the checkpoint:\n%s", log)
	}
}

// TestPreemptorWaitsForTheCheckpoint: the victim of a preemption takes
// 1.5 s to save its checkpoint after SIGTERM; the job that preempted it
// starts on its GPU only once it has exited (the traces show no moment
// with both on the GPU), and /metrics reports the handover.
func TestPreemptorWaitsForTheCheckpoint(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data, traces := t.TempDir(), t.TempDir()
	srv := startServer(t, "--data", data, "--sim-gpus", "1x1x80", "--thresholds", "3", "--grace", "5s")
	a := newAPI(t, srv.URL, "alice", "dev")
	victim := tracedJob(traces, 200)
	victim[2] = `trap 'sleep 1.5; exit 143' TERM; ` + victim[2]
	long := submit(t, a, map[string]any{"name": "victim", "gpus": 1, "command": victim})
	traceStarted(t, traces, long, "")
	a.waitQueue(long, 30*time.Second, 1) // past 3 GPU-seconds: demoted
	short := submit(t, a, map[string]any{"name": "preemptor", "gpus": 1, "command": tracedJob(traces, 8)})
	a.waitState(short, 60*time.Second, "succeeded")
	spans := checkTraces(t, traces)
	var v, p *runSpan
	for _, s := range spans {
		switch {
		case s.job == long && v == nil:
			v = s
		case s.job == short:
			p = s
		}
	}
	if v == nil || p == nil {
		t.Fatalf("traces: %v", spans)
	}
	if gap := p.first.Sub(v.last); gap < time.Second {
		t.Errorf("the preemptor started %v after the victim's last line; want after its 1.5 s checkpoint", gap)
	}
	m := metricsText(t, srv.URL)
	if !strings.Contains(m, "gpuportal_handover_seconds_count 1") {
		t.Errorf("/metrics lacks the handover:\n%s", grepLines(m, "handover"))
	}
	t.Logf("handover: %s; victim's last line %s, preemptor's first %s", grepLines(m, "handover_seconds_sum"),
		v.last.Format("15:04:05.000"), p.first.Format("15:04:05.000"))
	if j := a.job(long); j.Preemptions != 1 {
		t.Errorf("victim preemptions = %d, want 1", j.Preemptions)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestOneVictimForOneJob: three 1-GPU jobs run in queue 1 on a 3-GPU
// machine, each taking 4 s to save a checkpoint after SIGTERM, and a
// 3-GPU job they preempted waits in queue 1 before them. A new 1-GPU job
// preempts one of the three. Through that job's 4 s checkpoint the
// server passes every second: each pass saw it running, first of queue 1
// by the preempted-first rule, and the new job waiting, and stopped
// another of the three for it, until all three were stopped for one
// GPU. Judged from the jobs' traces: one run of the new job, starting
// after the one victim's last line, and one unbroken run of each of the
// other two.
func TestOneVictimForOneJob(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data, traces := t.TempDir(), t.TempDir()
	srv := startServer(t, "--data", data, "--sim-gpus", "1x3x80", "--thresholds", "3", "--grace", "10s", "--reserve-after", "0")
	a := newAPI(t, srv.URL, "alice", "dev")
	big := submit(t, a, map[string]any{"name": "big", "gpus": 3, "command": tracedJob(traces, 2000)})
	a.waitQueue(big, 30*time.Second, 1) // 3 GPU-s in a second
	var slow [3]int64
	for i := range slow {
		cmd := tracedJob(traces, 2000)
		cmd[2] = `trap 'sleep 4; exit 143' TERM; ` + cmd[2]
		slow[i] = submit(t, a, map[string]any{"name": fmt.Sprintf("slow-%d", i), "gpus": 1, "command": cmd})
	}
	for _, id := range slow {
		a.waitState(id, 60*time.Second, "running")
		a.waitQueue(id, 30*time.Second, 1)
	}
	if j := a.job(big); j.State == "running" || j.Queue != 1 {
		t.Fatalf("job %d (big) %s in queue %d: want it preempted, waiting in queue 1", big, j.State, j.Queue)
	}
	p := submit(t, a, map[string]any{"name": "new", "gpus": 1, "command": tracedJob(traces, 8)})
	a.waitState(p, 90*time.Second, "succeeded")
	preempted := 0
	for _, id := range slow {
		preempted += a.job(id).Preemptions
	}
	spans := checkTraces(t, traces)
	runs := map[int64]int{}
	var pspan *runSpan
	first := map[int64]*runSpan{} // each job's first run
	for _, s := range spans {
		runs[s.job]++
		if s.job == p {
			pspan = s
		}
		if f := first[s.job]; f == nil || s.run < f.run {
			first[s.job] = s
		}
	}
	if preempted != 1 {
		t.Errorf("%d of the three running jobs were preempted for job %d, which needs one GPU; want 1 (runs %v)", preempted, p, runs)
	}
	if pspan == nil || runs[p] != 1 {
		t.Fatalf("job %d ran %d times: %v", p, runs[p], spans)
	}
	kept := 0
	for _, id := range slow {
		if runs[id] == 1 && a.job(id).Preemptions == 0 {
			kept++
			continue
		}
		if gap := pspan.first.Sub(first[id].last); gap < 3*time.Second {
			t.Errorf("job %d started %v after its victim %d's last line; want after its 4 s checkpoint", p, gap, id)
		}
	}
	if kept != 2 {
		t.Errorf("%d of the three kept their first run; want 2", kept)
	}
}
