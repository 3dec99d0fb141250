package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/gate"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

// trainPy is a training script that uses the Python client. Arguments:
// the client's folder, the file to log its iterations to, iterations,
// seconds of work per iteration, the expected E and the peak it reports
// (MiB), its own marker file and its peer's. It starts its iterations
// once both scripts are connected (each touches its marker and waits
// for the peer's); with "meet", its first iteration also waits, inside
// the iteration, for the peer to be inside its own: that works only if
// their iterations may run at once. Each iteration logs its start and
// end (CLOCK_MONOTONIC, the same in every process) and its lane's jobs.
const trainPy = `
import os, sys, time
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import gpuportal_gate

out, n, work = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
expected, peak, mine, theirs = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], sys.argv[8]
meet = len(sys.argv) > 9 and sys.argv[9] == "meet"

def wait_for(path):
    deadline = time.monotonic() + 10
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.002)
    return os.path.exists(path)

gate = gpuportal_gate.connect()
print("gate", gate.enabled, gate.gpus, gate.policy, flush=True)
open(mine + ".ready", "w").close()
wait_for(theirs + ".ready")
with open(out, "w") as log:
    for i in range(n):
        with gate.iteration(expected_e_mib=expected) as it:
            start = time.monotonic_ns()
            if meet and i == 0:
                open(mine + ".inside", "w").close()
                print("met" if wait_for(theirs + ".inside") else "alone", flush=True)
            time.sleep(work)
            it.peak_e_mib = peak
            end = time.monotonic_ns()
        log.write("%d %d %d\n" % (start, end, it.lane_jobs))
        log.flush()
print("done", flush=True)
`

// quiet is a logger that drops everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// iteration is one logged iteration of a script.
type iteration struct {
	job        int64
	start, end int64 // ns, CLOCK_MONOTONIC
	laneJobs   int
}

// python3 is the Python interpreter itself: python3 on the PATH may be
// a shim (pyenv's) that takes seconds to start.
var python3 = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("python3: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
})

// gateAgent is an agent with a gate and one simulated 8 GiB GPU, and a
// folder holding the Python client and the training script. Its work
// folder is short: socket paths are limited.
func gateAgent(t *testing.T, policy lanes.Policy) (*Local, chan job.Exit, string) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 not found: the end-to-end test of the Python client needs it (scripts/ensure-torch installs it)")
		}
		t.Skip("python3 not found: the end-to-end test of the Python client needs it")
	}
	if _, err := python3(); err != nil {
		t.Fatal(err)
	}
	work, err := os.MkdirTemp("", "gpa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	exits := make(chan job.Exit, 8)
	a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 8192), WorkDir: work, Grace: time.Second,
		Gate: &lanes.Config{Policy: policy}, Logger: quiet}, exits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	// The client is copied so that Python writes nothing into static/.
	dir := t.TempDir()
	client, err := os.ReadFile(filepath.Join("..", "..", "static", "clients", "gpuportal_gate.py"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"gpuportal_gate.py": client, "train.py": []byte(trainPy)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return a, exits, dir
}

// startTrain starts job id running train.py, sharing GPU 0 with memory mem.
func startTrain(t *testing.T, a *Local, dir string, id int64, mem memest.Estimate, args ...string) {
	t.Helper()
	py, _ := python3()
	cmd := append([]string{py, filepath.Join(dir, "train.py"), dir, filepath.Join(dir, fmt.Sprintf("iterations-%d", id))}, args...)
	err := a.Start(context.Background(), job.Spec{JobID: id, Command: cmd, GPUs: []int{0}, Sharing: &job.Sharing{Memory: mem}})
	if err != nil {
		t.Fatal(err)
	}
}

// readIterations reads job id's log of iterations.
func readIterations(t *testing.T, dir string, id int64) []iteration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("iterations-%d", id)))
	if err != nil {
		t.Fatal(err)
	}
	var out []iteration
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		it := iteration{job: id}
		if _, err := fmt.Sscan(line, &it.start, &it.end, &it.laneJobs); err != nil {
			t.Fatalf("job %d log line %q: %v", id, line, err)
		}
		out = append(out, it)
	}
	return out
}

// waitExits waits for n exits, by job.
func waitExits(t *testing.T, a *Local, exits chan job.Exit, n int) map[int64]job.Exit {
	t.Helper()
	out := make(map[int64]job.Exit)
	for range n {
		ex := waitExit(t, exits)
		out[ex.JobID] = ex
	}
	for id, ex := range out {
		if ex.ExitCode != 0 {
			b, _ := os.ReadFile(a.LogPath(id))
			t.Logf("job %d exit %+v, output:\n%s", id, ex, b)
		}
	}
	return out
}

// Two real training scripts on one simulated GPU, run by the agent: in
// one lane their iterations take turns and never overlap; in two lanes
// they run at the same time.
func TestPythonClientSharesALane(t *testing.T) {
	const n = 10
	wide := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000}   // padded P 1100 + E 4255: two share a lane
	narrow := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 1000} // padded P 1100 + E 1105: a lane each
	tests := []struct {
		name   string
		mem    memest.Estimate
		peak   string // the peak each iteration reports
		lanes  int    // at the start
		spread bool   // measured peaks shrink E: the jobs get a lane each
	}{
		{"one lane", wide, "4000", 1, false},
		{"two lanes", narrow, "1000", 2, false},
		{"measured peaks shrink the lane, which spreads", wide, "500", 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, exits, dir := gateAgent(t, lanes.Pack)
			mark := func(id int64) string { return filepath.Join(dir, fmt.Sprintf("job-%d", id)) }
			meet := ""
			if tc.lanes == 2 {
				meet = "meet"
			}
			for _, id := range []int64{1, 2} {
				startTrain(t, a, dir, id, tc.mem, strconv.Itoa(n), "0.02", "0", tc.peak, mark(id), mark(3-id), meet)
			}
			if v := a.Lanes(); len(v) != 1 || len(v[0].Lanes) != tc.lanes {
				t.Fatalf("lanes = %+v, want %d on GPU 0", v, tc.lanes)
			}
			for id, ex := range waitExits(t, a, exits, 2) {
				if ex.ExitCode != 0 || ex.Requeue != nil {
					t.Fatalf("job %d: %+v", id, ex)
				}
			}
			if v := a.Lanes(); len(v[0].Lanes) != 0 {
				t.Errorf("lanes after the jobs ended = %+v, want none", v[0].Lanes)
			}
			its := append(readIterations(t, dir, 1), readIterations(t, dir, 2)...)
			if len(its) != 2*n {
				t.Fatalf("%d iterations logged, want %d", len(its), 2*n)
			}
			slices.SortFunc(its, func(x, y iteration) int { return int(x.start - y.start) })
			overlaps, switches := 0, 0
			for i := 1; i < len(its); i++ {
				if its[i].start < its[i-1].end {
					overlaps++
				}
				if its[i].job != its[i-1].job {
					switches++
				}
			}
			for id := int64(1); id <= 2; id++ {
				b, _ := os.ReadFile(a.LogPath(id))
				if !strings.Contains(string(b), "gate True [0] pack") {
					t.Errorf("job %d did not find the gate: %s", id, b)
				}
				if tc.lanes == 2 && !strings.Contains(string(b), "met") {
					t.Errorf("job %d ran its first iteration alone: %s", id, b)
				}
			}
			switch {
			case tc.spread:
				// Once a job reported memest.MinSamples peaks, its E is
				// corrected and it gets a lane of its own.
				if its[0].laneJobs != 2 || its[len(its)-1].laneJobs != 1 {
					t.Errorf("lane jobs first %d, last %d; want 2 then 1: %v", its[0].laneJobs, its[len(its)-1].laneJobs, its)
				}
			case tc.lanes == 1:
				if overlaps != 0 {
					t.Errorf("%d iterations overlap in one lane: %v", overlaps, its)
				}
				// Both ran from the start, so they took turns.
				if switches < n/2 || its[0].laneJobs != 2 {
					t.Errorf("%d switches between the jobs, lane of %d jobs; want them to take turns: %v", switches, its[0].laneJobs, its)
				}
			case tc.lanes == 2:
				if overlaps == 0 {
					t.Errorf("no iterations overlap in two lanes: %v", its)
				}
			}
		})
	}
}

// A job whose measured peak exceeds its lane is stopped, and its Exit
// says why and what to run it again with; its neighbour runs on.
func TestPythonClientOutgrowsItsLane(t *testing.T) {
	a, exits, dir := gateAgent(t, lanes.Fair)
	mem := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000}
	mark := func(id int64) string { return filepath.Join(dir, fmt.Sprintf("job-%d", id)) }
	startTrain(t, a, dir, 1, mem, "5", "0.01", "0", "500", mark(1), mark(2))
	startTrain(t, a, dir, 2, mem, "3", "0.01", "0", "9000", mark(2), mark(1))
	got := waitExits(t, a, exits, 2)
	if ex := got[1]; ex.ExitCode != 0 || ex.Requeue != nil {
		t.Errorf("the neighbour: %+v", ex)
	}
	ex := got[2]
	if ex.ExitCode == 0 || !strings.Contains(ex.Err, "stopped by the agent: job 2 outgrew its Salus lane on GPU 0") ||
		ex.Requeue == nil || ex.Requeue.EphemeralMiB != 9000 || ex.Requeue.PersistentMiB != 1000 {
		t.Fatalf("exit = %+v, requeue %+v", ex, ex.Requeue)
	}
	if b, _ := os.ReadFile(a.LogPath(2)); !strings.Contains(string(b), "gpuportal: stopping the job: job 2 outgrew") {
		t.Errorf("the job's output does not say why it stopped:\n%s", b)
	}
	if its := readIterations(t, dir, 1); len(its) != 5 {
		t.Errorf("the neighbour ran %d iterations, want 5", len(its))
	}
}

// The gate's variables go only to jobs that opted in, and the token is no
// use to a process outside the job, even one that read it.
func TestGateTokenIsTheJobsAlone(t *testing.T) {
	work, err := os.MkdirTemp("", "gpa")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	exits := make(chan job.Exit, 4)
	a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 8192), WorkDir: work, Grace: time.Second,
		Gate: &lanes.Config{}, Logger: quiet}, exits)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	show := []string{"sh", "-c", `echo "gate=$GPUPORTAL_GATE token=$GPUPORTAL_GATE_TOKEN"`}
	if err := a.Start(context.Background(), job.Spec{JobID: 1, Command: show, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	waitExits(t, a, exits, 1)
	if b, _ := os.ReadFile(a.LogPath(1)); string(b) != "gate= token=\n" {
		t.Errorf("a job that did not opt in sees %q", b)
	}

	mem := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 1000}
	if err := a.Start(context.Background(), job.Spec{JobID: 2, Command: []string{"sleep", "30"}, GPUs: []int{0}, Sharing: &job.Sharing{Memory: mem}}); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	pid := a.runs[2].pgid
	a.mu.Unlock()
	// Until the child has called exec, it has this process's environment.
	var path, token string
	for deadline := time.Now().Add(10 * time.Second); token == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatalf("cannot read the job's environment: %v", err)
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, GateEnv+"="); ok {
				path = v
			}
			if v, ok := strings.CutPrefix(kv, GateTokenEnv+"="); ok {
				token = v
			}
		}
	}
	if path != filepath.Join(work, "gate.sock") || len(token) != 64 {
		t.Fatalf("the job's gate %q, token %q", path, token)
	}
	// This test's process holds the token but is not the job.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hello, _ := json.Marshal(gate.Request{V: gate.Version, Op: gate.OpHello, Job: 2, Token: token})
	if _, err := c.Write(append(hello, '\n')); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	var r gate.Reply
	if err != nil || json.Unmarshal(line, &r) != nil || r.OK || !strings.Contains(r.Error, "not one of job 2's") {
		t.Errorf("an impostor with the token: %s, %v", line, err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the impostor's connection stays open: %v", err)
	}
	_ = a.Stop(context.Background(), job.RunRef{Job: 2})
	waitExits(t, a, exits, 1)

	// A job that does not fit any GPU does not start.
	err = a.Start(context.Background(), job.Spec{JobID: 3, Command: []string{"true"}, GPUs: []int{0}, Sharing: &job.Sharing{Memory: memest.Estimate{PersistentMiB: 9000}}})
	if !errors.Is(err, lanes.ErrTooLarge) {
		t.Errorf("a job larger than its GPU: %v", err)
	}
}
