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
	// Ten steps of 0.5s; each finished step is saved; SIGTERM saves and exits.
	script := `f="$GPUPORTAL_CHECKPOINT_DIR/step"; i=$(cat "$f" 2>/dev/null || echo 0)
echo "start at step $i"
trap 'echo "$i" > "$f"; echo "saved at step $i"; exit 143' TERM
while [ "$i" -lt 10 ]; do sleep 0.5 & wait $!; i=$((i+1)); echo "$i" > "$f"; done
echo "done at step $i"`
	var long jobView
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "counter", "gpus": 1, "command": []string{"sh", "-c", script}}, &long); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	a.waitState(long.ID, 30*time.Second, "running")
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
	if !strings.Contains(log, "start at step 0") || !strings.Contains(log, "saved at step") || !strings.Contains(log, "done at step 10") ||
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
