package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// A run that reaches its job's time limit is stopped once, and the job
// ends timed out, with the limit in its reason and how the run ended:
// on SIGTERM within the grace period, or killed by SIGKILL after it
// (before, the reason said SIGKILL even of a job that exited on
// SIGTERM); time counts over runs.
func TestTimeLimitStopsOnceAndEndsTimedOut(t *testing.T) {
	tests := []struct {
		name       string
		code       int
		err, ended string
	}{
		{"exits on SIGTERM", 143, "", "; exited with code 143 on n0"},
		{"killed by SIGKILL", -1, "killed by signal 9 (killed)", "; killed by signal 9 (killed) on n0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0, Command: []string{"train"}, TimeLimit: time.Hour, ExecutedS: 1800})
			n := newFakeNode("n0", 1)
			e, clock := newTestEngine(t, store, n)
			mustPass(t, e)
			if store.state(1) != job.Running {
				t.Fatalf("state %s, want running", store.state(1))
			}
			clock.t = clock.t.Add(29 * time.Minute)
			mustPass(t, e)
			if len(n.stops) != 0 {
				t.Fatalf("stopped after 59 of its 60 minutes")
			}
			clock.t = clock.t.Add(time.Minute) // 30 min earlier runs + 30 min now
			mustPass(t, e)
			mustPass(t, e)
			if len(n.stops) != 1 {
				t.Fatalf("stops = %v, want one", n.stops)
			}
			e.testExit(ctx, job.Exit{Node: "n0", JobID: 1, ExitCode: tc.code, Err: tc.err, At: clock.t.Add(5 * time.Second)})
			want := "time limit 01:00:00 reached: asked to stop with SIGTERM, then SIGKILL if still running after the grace period" + tc.ended
			if store.state(1) != job.TimedOut || store.reason[1] != want {
				t.Errorf("state %s reason %q; want timed_out, %q", store.state(1), store.reason[1], want)
			}
		})
	}
}

// A preemption pending when the limit is reached becomes the time-out:
// the job would otherwise wait to run past its limit.
func TestTimeLimitOverridesPendingPreemption(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0, TimeLimit: time.Minute})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	e.runs[1].stop = job.Preempted
	clock.t = clock.t.Add(time.Minute)
	mustPass(t, e)
	e.testExit(context.Background(), exit("n0", 1, -1, clock.t))
	if store.state(1) != job.TimedOut {
		t.Errorf("state %s, want timed_out", store.state(1))
	}
}

func TestGates(t *testing.T) {
	tests := []struct {
		name      string
		jobs      []Job
		wantState map[int64]job.State
		wantWait  map[int64]string
	}{
		{"after_ok waits while the other runs",
			[]Job{{ID: 2, GPUs: 1, Deps: []Dep{{job.Dependency{Kind: job.AfterOK, JobID: 1}, job.Running}}}},
			map[int64]job.State{2: job.Queued}, map[int64]string{2: "waiting for job 1 to succeed"}},
		{"after_ok starts once the other succeeded",
			[]Job{{ID: 2, GPUs: 1, Deps: []Dep{{job.Dependency{Kind: job.AfterOK, JobID: 1}, job.Succeeded}}}},
			map[int64]job.State{2: job.Running}, nil},
		{"after_ok is cancelled when the other failed",
			[]Job{{ID: 2, GPUs: 1, Deps: []Dep{{job.Dependency{Kind: job.AfterOK, JobID: 1}, job.Failed}}}},
			map[int64]job.State{2: job.Cancelled}, nil},
		{"after_any starts after a failure",
			[]Job{{ID: 2, GPUs: 1, Deps: []Dep{{job.Dependency{Kind: job.AfterAny, JobID: 1}, job.TimedOut}}}},
			map[int64]job.State{2: job.Running}, nil},
		{"after_failed is cancelled when the other succeeded",
			[]Job{{ID: 2, GPUs: 1, Deps: []Dep{{job.Dependency{Kind: job.AfterFailed, JobID: 1}, job.Succeeded}}}},
			map[int64]job.State{2: job.Cancelled}, nil},
		{"an unknown job cancels",
			[]Job{{ID: 2, GPUs: 1, Deps: []Dep{{job.Dependency{Kind: job.AfterAny, JobID: 9}, ""}}}},
			map[int64]job.State{2: job.Cancelled}, nil},
		{"a waiting job whose time is used up times out",
			[]Job{{ID: 2, GPUs: 1, TimeLimit: time.Minute, ExecutedS: 60}},
			map[int64]job.State{2: job.TimedOut}, nil},
		{"an array runs at most its limit, lowest indices first",
			[]Job{
				{ID: 10, GPUs: 1, Array: &job.ArrayTask{ID: 10, Index: 0}, ArrayLimit: 2},
				{ID: 11, GPUs: 1, Array: &job.ArrayTask{ID: 10, Index: 1}, ArrayLimit: 2},
				{ID: 12, GPUs: 1, Array: &job.ArrayTask{ID: 10, Index: 2}, ArrayLimit: 2},
			},
			map[int64]job.State{10: job.Running, 11: job.Running, 12: job.Queued},
			map[int64]string{12: "at most 2 of its tasks run at once (%2)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.jobs {
				tc.jobs[i].SubmittedAt = t0
			}
			store := newMemStore(tc.jobs...)
			e, _ := newTestEngine(t, store, newFakeNode("n0", 4))
			mustPass(t, e)
			mustPass(t, e)
			for id, want := range tc.wantState {
				if got := store.state(id); got != want {
					t.Errorf("job %d: state %s, want %s (reason %q)", id, got, want, store.reason[id])
				}
			}
			for id, want := range tc.wantWait {
				if !strings.Contains(store.waits[id], want) {
					t.Errorf("job %d waits with %q, want %q", id, store.waits[id], want)
				}
			}
		})
	}
}

// An array's next task starts only when one of its running tasks ends.
func TestArrayLimitHoldsAcrossPasses(t *testing.T) {
	var jobs []Job
	for i := range 6 {
		jobs = append(jobs, Job{ID: int64(10 + i), GPUs: 1, SubmittedAt: t0, Array: &job.ArrayTask{ID: 10, Index: i}, ArrayLimit: 2})
	}
	store := newMemStore(jobs...)
	n := newFakeNode("n0", 8)
	e, clock := newTestEngine(t, store, n)
	for step := range 6 {
		mustPass(t, e)
		running := 0
		for _, j := range store.jobs {
			if j.State == job.Running {
				running++
			}
		}
		if running > 2 {
			t.Fatalf("step %d: %d tasks running, limit 2", step, running)
		}
		for id, j := range store.jobs {
			if j.State == job.Running {
				delete(n.running, id)
				e.testExit(context.Background(), exit("n0", id, 0, clock.t))
				break
			}
		}
	}
	mustPass(t, e)
	if len(n.starts) != 6 {
		t.Errorf("%d tasks started, want 6", len(n.starts))
	}
	for _, s := range n.starts {
		if s.Array == nil || s.Array.ID != 10 {
			t.Errorf("start %+v does not name its array", s)
		}
	}
}

// A run the executor says was cancelled outside gpuportal (scancel) is
// cancelled, never failed or retried.
func TestCancelOutsideIsACancel(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0, Retries: 3})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	e.cfg.MaxRetries = 3
	mustPass(t, e)
	e.testExit(context.Background(), job.Exit{Node: "n0", JobID: 1, ExitCode: -1, Err: "cancelled in Slurm", EndedAs: job.Cancelled, At: clock.t})
	if store.state(1) != job.Cancelled || !strings.Contains(store.reason[1], "cancelled in Slurm") {
		t.Errorf("state %s reason %q; want cancelled", store.state(1), store.reason[1])
	}
}

// The job's own variables, folder and array task reach its machine.
func TestSpecCarriesEnvDirAndTask(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0, Command: []string{"env"}, Env: []string{"LR=0.1"}, Dir: "/data/x",
		Array: &job.ArrayTask{ID: 1, Index: 0}, TimeLimit: time.Hour, ExecutedS: 600})
	n := newFakeNode("n0", 1)
	e, _ := newTestEngine(t, store, n)
	mustPass(t, e)
	if len(n.starts) != 1 || n.starts[0].Dir != "/data/x" || len(n.starts[0].Env) != 1 || n.starts[0].Array == nil || n.starts[0].TimeLeft != 50*time.Minute {
		t.Errorf("starts = %+v", n.starts)
	}
}

// A run its machine stopped because its time was up (the engine was
// away) ends the job timed out, never failed or retried.
func TestMachineTimedOutRun(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0, Retries: 3, TimeLimit: time.Minute})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	e.cfg.MaxRetries = 3
	mustPass(t, e)
	e.testExit(context.Background(), job.Exit{Node: "n0", JobID: 1, ExitCode: -1, Err: "time limit reached: stopped by its agent",
		EndedAs: job.TimedOut, At: clock.t.Add(70 * time.Second)})
	if store.state(1) != job.TimedOut || !strings.Contains(store.reason[1], "stopped by its agent on n0") {
		t.Errorf("state %s reason %q; want timed_out", store.state(1), store.reason[1])
	}
}
