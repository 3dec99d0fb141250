package agent

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

func newTestAgent(t *testing.T, grace time.Duration) (*Local, chan job.Exit) {
	t.Helper()
	exits := make(chan job.Exit, 8)
	a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 4, 8192), WorkDir: t.TempDir(), Grace: grace}, exits)
	if err != nil {
		t.Fatal(err)
	}
	return a, exits
}

func waitExit(t *testing.T, exits chan job.Exit) job.Exit {
	t.Helper()
	select {
	case ex := <-exits:
		return ex
	case <-time.After(20 * time.Second):
		t.Fatal("no exit reported within 20s")
	}
	return job.Exit{}
}

func TestProcessExitCodesAndEnvironment(t *testing.T) {
	tests := []struct {
		name     string
		command  []string
		wantCode int
		wantLog  string
	}{
		{"success sees its GPUs", []string{"sh", "-c", "echo gpus=$CUDA_VISIBLE_DEVICES job=$GPUPORTAL_JOB_ID"}, 0, "gpus=1,3 job=7"},
		{"failure code is kept", []string{"sh", "-c", "echo oops >&2; exit 42"}, 42, "oops"},
		{"arguments are not run by a shell", []string{"echo", "a; exit 9", "$HOME"}, 0, "a; exit 9 $HOME"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, exits := newTestAgent(t, time.Second)
			if err := a.Start(context.Background(), job.Spec{JobID: 7, Command: tc.command, GPUs: []int{1, 3}}); err != nil {
				t.Fatal(err)
			}
			ex := waitExit(t, exits)
			if ex.JobID != 7 || ex.ExitCode != tc.wantCode || ex.Node != "n0" {
				t.Errorf("exit = %+v, want code %d", ex, tc.wantCode)
			}
			log, err := os.ReadFile(a.LogPath(7))
			if err != nil || !strings.Contains(string(log), tc.wantLog) {
				t.Errorf("log = %q, %v; want it to contain %q", log, err, tc.wantLog)
			}
		})
	}
}

// A job killed by a signal says which, by number and name, as the Slurm
// executor's reason does: "killed by killed" was what a SIGKILL read as.
func TestProcessKilledBySignalSaysWhich(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		wantErr string
	}{
		{"SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, "killed by signal 9 (killed)"},
		{"SIGSEGV", []string{"sh", "-c", "kill -SEGV $$"}, "killed by signal 11 (segmentation fault)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, exits := newTestAgent(t, time.Second)
			if err := a.Start(context.Background(), job.Spec{JobID: 8, Command: tc.command, GPUs: []int{0}}); err != nil {
				t.Fatal(err)
			}
			if ex := waitExit(t, exits); ex.ExitCode != -1 || ex.Err != tc.wantErr {
				t.Errorf("exit = %d %q, want -1 %q", ex.ExitCode, ex.Err, tc.wantErr)
			}
		})
	}
}

func TestStartRefusesBadRequests(t *testing.T) {
	a, exits := newTestAgent(t, time.Second)
	ctx := context.Background()
	if err := a.Start(ctx, job.Spec{JobID: 1, Command: []string{"/no/such/program"}, GPUs: []int{0}}); err == nil {
		t.Error("missing program: no error")
	}
	if err := a.Start(ctx, job.Spec{JobID: 2, SimRemaining: time.Hour, GPUs: []int{4}}); err == nil {
		t.Error("GPU 4 of 4: no error")
	}
	if err := a.Start(ctx, job.Spec{JobID: 3, SimRemaining: time.Hour, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx, job.Spec{JobID: 3, SimRemaining: time.Hour, GPUs: []int{1}}); err == nil {
		t.Error("second start of a running job: no error")
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if ex := waitExit(t, exits); ex.JobID != 3 {
		t.Errorf("shutdown exit = %+v", ex)
	}
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	a, exits := newTestAgent(t, 200*time.Millisecond)
	// The job ignores SIGTERM, so only SIGKILL after the grace ends it.
	cmd := []string{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}
	if err := a.Start(context.Background(), job.Spec{JobID: 5, Command: cmd, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(a.LogPath(5))
		if strings.Contains(string(b), "ready") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job never became ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.Stop(context.Background(), job.RunRef{Job: 5}); err != nil {
		t.Fatal(err)
	}
	ex := waitExit(t, exits)
	if ex.ExitCode != -1 || !strings.Contains(ex.Err, "killed") {
		t.Errorf("exit = %+v, want killed", ex)
	}
	if len(a.Running()) != 0 {
		t.Errorf("still running: %v", a.Running())
	}
}

func TestSimulatedJobHoldsGPUMemory(t *testing.T) {
	a, exits := newTestAgent(t, time.Second)
	mem := gpu.SimMemory{PersistentMiB: 3000}
	if err := a.Start(context.Background(), job.Spec{JobID: 9, SimRemaining: 300 * time.Millisecond, Memory: mem, GPUs: []int{2}}); err != nil {
		t.Fatal(err)
	}
	if s := a.Sample(time.Now()); s[2].MemUsedMiB != 3000 || len(s[2].Jobs) != 1 {
		t.Errorf("while running: %+v", s[2])
	}
	if ex := waitExit(t, exits); ex.ExitCode != 0 {
		t.Errorf("exit = %+v", ex)
	}
	if s := a.Sample(time.Now()); s[2].MemUsedMiB != 0 {
		t.Errorf("after exit: %+v", s[2])
	}
}

// TestSimulatedJobSavesItsCheckpoint: a simulated job asked to stop holds
// its GPU (its memory in the samples) for Config.SimCheckpoint, as a
// training job saving its checkpoint does, then exits stopped by SIGTERM;
// one whose checkpoint would outlast the grace period is killed at it.
func TestSimulatedJobSavesItsCheckpoint(t *testing.T) {
	for _, c := range []struct {
		name             string
		checkpoint       time.Duration
		grace            time.Duration
		held             time.Duration // at least this long after the stop
		signal, wantLine string
	}{
		{"within the grace period", 400 * time.Millisecond, 5 * time.Second, 400 * time.Millisecond, "signal 15", "checkpoint saved"},
		{"past the grace period", time.Minute, 300 * time.Millisecond, 300 * time.Millisecond, "signal 9", "killed (SIGKILL)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			exits := make(chan job.Exit, 1)
			dir := t.TempDir()
			a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 4, 8192), WorkDir: dir, Grace: c.grace, SimCheckpoint: c.checkpoint}, exits)
			if err != nil {
				t.Fatal(err)
			}
			ref := job.RunRef{Job: 9, Run: 1}
			if err := a.Start(context.Background(), job.Spec{JobID: 9, Run: 1, SimRemaining: time.Hour, Memory: gpu.SimMemory{PersistentMiB: 3000}, GPUs: []int{2}}); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			if err := a.Stop(context.Background(), ref); err != nil {
				t.Fatal(err)
			}
			if s := a.Sample(time.Now()); s[2].MemUsedMiB != 3000 {
				t.Errorf("while it saves its checkpoint: GPU 2 holds %d MiB; want the job's 3000", s[2].MemUsedMiB)
			}
			ex := waitExit(t, exits)
			if held := ex.At.Sub(stopped); held < c.held {
				t.Errorf("exited %v after the stop; want at least %v", held, c.held)
			}
			if ex.ExitCode != -1 || !strings.Contains(ex.Err, c.signal) {
				t.Errorf("exit %+v; want killed by %s", ex, c.signal)
			}
			out, err := os.ReadFile(a.LogPath(9))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), "saving a checkpoint") || !strings.Contains(string(out), c.wantLine) {
				t.Errorf("output:\n%s\nwant it saving a checkpoint, then %q", out, c.wantLine)
			}
		})
	}
}
