package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestFencedEngineDecidesNothing: a leader that cannot confirm its lock
// starts nothing, records nothing and acknowledges no exit, while its
// machines' runs go on; once it holds the lock again, the held exit is
// recorded and acknowledged, and the waiting job starts.
func TestFencedEngineDecidesNothing(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0}, Job{ID: 2, GPUs: 1, SubmittedAt: t0.Add(time.Second)})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	if store.state(1) != job.Running {
		t.Fatalf("job 1 = %s, want running", store.state(1))
	}

	e.Fence("check the lock's connection: connection refused")
	if why, since := e.Fenced(); why == "" || !since.Equal(clock.t) {
		t.Errorf("Fenced() = %q, %v; want the cause, since %v", why, since, clock.t)
	}
	acks := 0
	delete(n.running, 1)
	e.handleExit(ctx, job.Exit{Node: "n0", JobID: 1, Run: 1, At: clock.t, Recorded: func() { acks++ }})
	clock.t = clock.t.Add(time.Minute) // far past LostAfter: nothing is requeued either
	mustPass(t, e)
	if acks != 0 || store.state(1) != job.Running || store.state(2) != job.Queued || len(n.starts) != 1 {
		t.Fatalf("fenced: acks %d, job 1 %s, job 2 %s, %d starts; want 0, running, queued, 1", acks, store.state(1), store.state(2), len(n.starts))
	}
	// Pages learn that the run has ended, though the store says it runs.
	if h, ok := e.HeldExits()[1]; !ok || h.Run != 1 || h.Node != "n0" || h.ExitCode != 0 || !h.At.Equal(t0) || !errors.Is(h.Err, errFenced) {
		t.Errorf("HeldExits()[1] = %+v, %v; want run 1's end on n0, exit 0, at %v, held for the fence", h, ok, t0)
	}

	e.Unfence()
	mustPass(t, e) // the held exit is recorded first
	if acks != 1 || store.state(1) != job.Succeeded {
		t.Fatalf("unfenced: acks %d, job 1 %s; want 1, succeeded", acks, store.state(1))
	}
	if h := e.HeldExits(); len(h) != 0 {
		t.Errorf("HeldExits() = %+v once recorded; want none", h)
	}
	mustPass(t, e)
	if store.state(2) != job.Running {
		t.Errorf("job 2 = %s, want it started on the freed GPU", store.state(2))
	}
}

// TestPassSkippedWhenTheLockIsNotConfirmed: Config.Confirm is asked
// before every pass; a pass it cannot confirm starts nothing, whatever
// the lease watcher has yet to notice.
func TestPassSkippedWhenTheLockIsNotConfirmed(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
	n := newFakeNode("n0", 1)
	e, _ := newTestEngine(t, store, n)
	lockErr := errors.New("confirm the leader lock: connection reset")
	e.cfg.Confirm = func(context.Context) error { return lockErr }
	mustPass(t, e)
	if store.state(1) != job.Queued || len(n.starts) != 0 {
		t.Fatalf("job 1 = %s with %d starts while the lock is unconfirmed; want queued, none", store.state(1), len(n.starts))
	}
	lockErr = nil
	mustPass(t, e)
	if store.state(1) != job.Running {
		t.Errorf("job 1 = %s once the lock is confirmed, want running", store.state(1))
	}
}

// TestTakeoverHoldDelaysRequeues: a new leader waits LostAfter plus
// TakeoverHold before it requeues the runs of a machine it has not heard:
// the replica that led before may keep them running that long.
func TestTakeoverHoldDelaysRequeues(t *testing.T) {
	start := t0.Add(-time.Hour)
	store := newMemStore(Job{ID: 1, GPUs: 1, State: job.Running, Placement: []gpu.Ref{{Node: "away", Index: 0}},
		LastStartAt: &start, SubmittedAt: start})
	e, clock := newTestEngine(t, store)
	e.cfg.TakeoverHold = 2 * time.Minute
	tests := []struct {
		after time.Duration
		want  job.State
	}{
		{31 * time.Second, job.Running},
		{2*time.Minute + 29*time.Second, job.Running},
		{2*time.Minute + 31*time.Second, job.Queued},
	}
	for _, tc := range tests {
		clock.t = t0.Add(tc.after)
		e.requeueLost(context.Background(), mustJobs(t, store), clock.t)
		if got := store.state(1); got != tc.want {
			t.Errorf("%v after the engine began leading: job 1 %s, want %s", tc.after, got, tc.want)
		}
	}
}

// TestStartCancelledByShutdownIsNotAFailure: a start in flight when the
// engine stops (its context ends) is not the job's failure: the job stays
// running in the store, for the next leader to adopt or requeue.
func TestStartCancelledByShutdownIsNotAFailure(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
	n := newFakeNode("n0", 1)
	n.failAll, n.startErr = true, fmt.Errorf("start job 1 on n0: %w", context.Canceled)
	e, clock := newTestEngine(t, store, n)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	jobs := mustJobs(t, store)
	e.start(ctx, jobs[0], []gpu.Ref{{Node: "n0", Index: 0}}, clock.t, nil)
	if store.state(1) != job.Running || store.end[1] != nil {
		t.Errorf("job 1 = %s, exit %v after its start was cancelled; want still running, no exit code", store.state(1), store.end[1])
	}
}

// TestSteppedDownEngineForgetsWhatItLed: a fenced leader that steps down
// (another replica leads) forgets its machines, its runs and the exit it
// held, which stays unacknowledged for its agent to send to the new
// leader; it is fenced no more, and cancels as a follower does, through
// the store.
func TestSteppedDownEngineForgetsWhatItLed(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0}, Job{ID: 2, GPUs: 1, SubmittedAt: t0})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	e.Fence("another replica took the leader lock")
	acks := 0
	delete(n.running, 1)
	e.handleExit(ctx, job.Exit{Node: "n0", JobID: 1, Run: 1, At: clock.t, Recorded: func() { acks++ }})

	e.StepDown()
	if why, _ := e.Fenced(); why != "" {
		t.Errorf("Fenced() = %q after the step down; want a follower, not fenced", why)
	}
	if got := e.Nodes(); len(got) != 0 {
		t.Errorf("%d machines after the step down; want none", len(got))
	}
	if acks != 0 || len(e.runs) != 0 || len(e.unrecorded) != 0 {
		t.Errorf("after the step down: %d acks, %d runs, %d held outcomes; want none", acks, len(e.runs), len(e.unrecorded))
	}
	if err := e.Cancel(ctx, 2, "changed my mind"); err != nil || store.state(2) != job.Cancelled {
		t.Errorf("cancel on the stepped-down engine: %v, job 2 %s; want it cancelled through the store", err, store.state(2))
	}
	if store.state(1) != job.Running {
		t.Errorf("job 1 = %s; want it left running in the store for the new leader", store.state(1))
	}
}
