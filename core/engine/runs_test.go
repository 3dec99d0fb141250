package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// addNode and removeNode run AddNode and RemoveNode the way the Run loop
// would, on the test's goroutine.
func addNode(t *testing.T, e *Engine, n Node) {
	t.Helper()
	go func() { _ = e.AddNode(context.Background(), n) }()
	(<-e.calls)(context.Background())
}

func removeNode(t *testing.T, e *Engine, name string) {
	t.Helper()
	go func() { _ = e.RemoveNode(context.Background(), name) }()
	(<-e.calls)(context.Background())
}

// TestMachineBackWithAReplacedRun is the partition of issue 15: a1 goes
// silent, its job is requeued and started on a2, then a1 comes back still
// running the first run. Only that run is stopped; the job goes on on a2.
func TestMachineBackWithAReplacedRun(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
	a1, a2 := newFakeNode("a1", 1), newFakeNode("a2", 1)
	e, clock := newTestEngine(t, store, a1)
	mustPass(t, e)
	if store.state(1) != job.Running || store.jobs[1].Run != 1 {
		t.Fatalf("job 1: %s run %d, want running run 1", store.state(1), store.jobs[1].Run)
	}
	removeNode(t, e, "a1")
	addNode(t, e, a2)
	clock.t = clock.t.Add(31 * time.Second) // past LostAfter
	mustPass(t, e)                          // requeued
	mustPass(t, e)                          // started on a2
	if store.jobs[1].Run != 2 || store.jobs[1].Placement[0] != (gpu.Ref{Node: "a2", Index: 0}) {
		t.Fatalf("job 1: run %d on %v, want run 2 on a2", store.jobs[1].Run, store.jobs[1].Placement)
	}

	addNode(t, e, a1) // back, still running run 1
	mustPass(t, e)
	if want := []job.RunRef{{Job: 1, Run: 1}}; len(a1.stopRefs) != 1 || a1.stopRefs[0] != want[0] {
		t.Errorf("a1 stops = %v, want %v", a1.stopRefs, want)
	}
	if len(a2.stopRefs) != 0 {
		t.Errorf("a2 stops = %v, want none: the current run goes on", a2.stopRefs)
	}
	if store.state(1) != job.Running || store.jobs[1].Run != 2 {
		t.Errorf("job 1: %s run %d, want running run 2", store.state(1), store.jobs[1].Run)
	}
	// a1's GPU stays taken until the stray run has exited.
	snap, _ := e.snapshot(nil, clock.t)
	for _, n := range snap.Nodes {
		if n.Name == "a1" && len(n.GPUs) != 0 {
			t.Errorf("a1 offers GPUs %v while the stray run holds them", n.GPUs)
		}
	}
	delete(a1.running, 1)
	e.handleExit(ctx, job.Exit{Node: "a1", JobID: 1, Run: 1, ExitCode: -1, At: clock.t})
	if store.state(1) != job.Running || store.jobs[1].Run != 2 {
		t.Errorf("after the stray's exit, job 1: %s run %d, want running run 2", store.state(1), store.jobs[1].Run)
	}
	snap, _ = e.snapshot(nil, clock.t)
	for _, n := range snap.Nodes {
		if n.Name == "a1" && len(n.GPUs) != 1 {
			t.Errorf("a1 offers GPUs %v once the stray ended, want its one GPU", n.GPUs)
		}
	}
}

func TestStaleExitChangesNothing(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	store.jobs[1].Run = 5 // as if the store had moved on
	e.runs[1].id = 5
	acked := false
	e.handleExit(ctx, job.Exit{Node: "n0", JobID: 1, Run: 4, ExitCode: 0, At: clock.t, Recorded: func() { acked = true }})
	if store.state(1) != job.Running {
		t.Errorf("a stale exit changed job 1 to %s", store.state(1))
	}
	if !acked {
		t.Error("a stale exit was not acknowledged: the agent would send it forever")
	}
}

// TestResumeWhenNothingReplacedTheRun: the job was requeued while its
// machine was away and has not started elsewhere; the machine comes back
// with it: the job is that run again, not a second copy, and its time
// counts the 31 s it ran while away.
func TestResumeWhenNothingReplacedTheRun(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0}, Job{ID: 2, GPUs: 1, SubmittedAt: t0.Add(time.Second)})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	removeNode(t, e, "n0")
	clock.t = clock.t.Add(31 * time.Second)
	mustPass(t, e)
	if store.state(1) != job.Queued {
		t.Fatalf("job 1 = %s, want requeued", store.state(1))
	}
	back := &gpusNode{fakeNode: n, gpus: map[int64][]int{1: {0}}}
	addNode(t, e, back)
	mustPass(t, e)
	if store.state(1) != job.Running || store.jobs[1].Run != 1 || !strings.Contains(store.reason[1], "resumed") {
		t.Errorf("job 1: %s run %d (%q), want running run 1 again, resumed", store.state(1), store.jobs[1].Run, store.reason[1])
	}
	if len(n.stopRefs) != 0 || len(n.starts) != 1 {
		t.Errorf("stops %v, starts %d: want the run left alone and nothing started", n.stopRefs, len(n.starts))
	}
	if store.state(2) != job.Queued {
		t.Errorf("job 2 = %s, want it waiting: the GPU is job 1's", store.state(2))
	}
	if r := e.runs[1]; r == nil || !r.started.Equal(t0) {
		t.Errorf("the engine's run of job 1 = %+v, want it counted from its start at %v (it never stopped)", r, t0)
	}
	clock.t = clock.t.Add(9 * time.Second)
	delete(n.running, 1)
	e.handleExit(context.Background(), job.Exit{Node: "n0", JobID: 1, Run: 1, ExitCode: 0, At: clock.t})
	mustPass(t, e)
	if j := store.jobs[1]; j.State != job.Succeeded || j.ExecutedS != 40 {
		t.Errorf("job 1: %s, executed %v s; want succeeded after 40 s (31 while its machine was away, 9 after)", j.State, j.ExecutedS)
	}
}

// gpusNode is a fake node that reports its runs' GPUs.
type gpusNode struct {
	*fakeNode
	gpus map[int64][]int
}

func (n *gpusNode) RunGPUs(id int64) ([]int, bool) { g, ok := n.gpus[id]; return g, ok }

// TestPreemptorWaitsForTheVictim: the GPUs of a preempted run are handed
// over only once its processes are gone.
func TestPreemptorWaitsForTheVictim(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-time.Minute)
	store := newMemStore(
		Job{ID: 1, GPUs: 1, State: job.Running, Placement: []gpu.Ref{{Node: "n0", Index: 0}}, LastStartAt: &start, SubmittedAt: start},
		Job{ID: 2, GPUs: 1, SubmittedAt: t0},
	)
	n := newFakeNode("n0", 1)
	n.running[1] = 1
	e, clock := newTestEngine(t, store, n)
	sc, err := sched.New(sched.Config{Policy: "tiresias-l", Thresholds: []float64{30}})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	mustPass(t, e)
	if len(n.stops) != 1 || len(n.starts) != 0 {
		t.Fatalf("stops %v, starts %d: want job 1 asked to stop and nothing started yet", n.stops, len(n.starts))
	}
	clock.t = clock.t.Add(3 * time.Second)
	mustPass(t, e)
	if len(n.starts) != 0 {
		t.Fatalf("job 2 started on a GPU job 1 still holds")
	}
	delete(n.running, 1)
	e.handleExit(ctx, job.Exit{Node: "n0", JobID: 1, Run: 1, ExitCode: -1, At: clock.t})
	mustPass(t, e)
	if len(n.starts) != 1 || n.starts[0].JobID != 2 {
		t.Fatalf("starts = %+v, want job 2 once job 1 exited", n.starts)
	}
	st := e.Stats()
	if st.Handovers != 1 || st.HandoverMax != 3*time.Second {
		t.Errorf("handovers %d, max %s; want 1 of 3s", st.Handovers, st.HandoverMax)
	}
}

// TestExitAcknowledgedOnlyOnceStored: a store that fails keeps the exit
// unacknowledged and the run's GPUs taken; the next pass after the store
// recovers records it, once.
func TestExitAcknowledgedOnlyOnceStored(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0}, Job{ID: 2, GPUs: 1, SubmittedAt: t0.Add(time.Second)})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	store.fail = errors.New("disk full")
	acks := 0
	delete(n.running, 1)
	e.handleExit(ctx, job.Exit{Node: "n0", JobID: 1, Run: 1, ExitCode: 0, At: clock.t, Recorded: func() { acks++ }})
	if acks != 0 {
		t.Fatal("exit acknowledged while the store refused it")
	}
	// Sent again (the agent reconnected): still not acknowledged.
	e.handleExit(ctx, job.Exit{Node: "n0", JobID: 1, Run: 1, ExitCode: 0, At: clock.t, Recorded: func() { acks++ }})
	clock.t = clock.t.Add(time.Second)
	mustPass(t, e)
	if acks != 0 || store.state(1) != job.Running || store.state(2) != job.Queued {
		t.Fatalf("acks %d, job 1 %s, job 2 %s while the store fails; want 0, running, queued", acks, store.state(1), store.state(2))
	}
	store.mu.Lock()
	store.fail = nil
	store.mu.Unlock()
	mustPass(t, e)
	if acks != 2 || store.state(1) != job.Succeeded {
		t.Errorf("acks %d, job 1 %s after the store came back; want 2 acks (one per copy sent), succeeded", acks, store.state(1))
	}
	mustPass(t, e)
	if store.state(2) != job.Running {
		t.Errorf("job 2 = %s, want it started on the freed GPU", store.state(2))
	}
}

// TestLostPartOfAGang: a job on two machines loses one with its machine.
// The other part is stopped at once, and the job waits again only once the
// lost part is known gone: its machine came back without it, or has had
// the time to fence it. It never runs twice.
func TestLostPartOfAGang(t *testing.T) {
	for _, tc := range []struct {
		name string
		back bool // n0 comes back (without the run) before LostAfter
	}{{"machine back without the part", true}, {"machine away past LostAfter", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := newMemStore(Job{ID: 1, GPUs: 2, SubmittedAt: t0})
			n0, n1 := newFakeNode("n0", 1), newFakeNode("n1", 1)
			e, clock := newTestEngine(t, store, n0, n1)
			mustPass(t, e)
			if store.state(1) != job.Running || len(n0.starts) != 1 || len(n1.starts) != 1 {
				t.Fatalf("job 1 %s; starts %d, %d: want one part on each machine", store.state(1), len(n0.starts), len(n1.starts))
			}
			clock.t = clock.t.Add(10 * time.Second)
			removeNode(t, e, "n0")
			if len(n1.stopRefs) != 1 {
				t.Fatalf("n1 stops = %v, want its part stopped at once", n1.stopRefs)
			}
			delete(n1.running, 1)
			e.handleExit(ctx, job.Exit{Node: "n1", JobID: 1, Run: 1, ExitCode: -1, At: clock.t.Add(2 * time.Second)})
			clock.t = clock.t.Add(5 * time.Second)
			mustPass(t, e)
			if store.state(1) != job.Running {
				t.Fatalf("job 1 = %s while its part on n0 may still run; want it held as running", store.state(1))
			}
			if !tc.back {
				clock.t = clock.t.Add(31 * time.Second)
				mustPass(t, e) // the run ends: queued, for want of n0's GPU
				if store.state(1) != job.Queued || store.jobs[1].Run != 1 || !strings.Contains(store.reason[1], "lost") {
					t.Errorf("job 1: %s run %d (%q), want run 1 ended as lost", store.state(1), store.jobs[1].Run, store.reason[1])
				}
				// It ended when n1's part did, 2 s after n0 was lost: not
				// when the engine took n0's part for gone.
				if got := store.jobs[1].ExecutedS; got != 12 {
					t.Errorf("run 1 counted %v s, want 12 (to the later of n0's loss and n1's exit)", got)
				}
			}
			delete(n0.running, 1) // it died with the machine
			addNode(t, e, n0)
			mustPass(t, e) // starts again
			if store.state(1) != job.Running || store.jobs[1].Run != 2 {
				t.Errorf("job 1: %s run %d, want running run 2", store.state(1), store.jobs[1].Run)
			}
		})
	}
}

// TestUnansweredStartWaitsForTheFence: a start whose answer was lost may
// have started: the job does not start elsewhere until its machine has
// had the time to fence it.
func TestUnansweredStartWaitsForTheFence(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
	mute, other := newFakeNode("mute", 1), newFakeNode("other", 1)
	mute.failAll, mute.startErr = true, fmt.Errorf("start: %w", job.ErrDisconnected)
	e, clock := newTestEngine(t, store, mute)
	mustPass(t, e)
	removeNode(t, e, "mute")
	addNode(t, e, other)
	clock.t = clock.t.Add(5 * time.Second)
	mustPass(t, e)
	mustPass(t, e)
	if len(other.starts) != 0 {
		t.Fatalf("started on another machine %v after the start's answer was lost", clock.t.Sub(t0))
	}
	clock.t = clock.t.Add(30 * time.Second)
	mustPass(t, e)
	mustPass(t, e)
	if len(other.starts) != 1 || store.jobs[1].Run != 2 {
		t.Errorf("starts on other %d, run %d: want run 2 there once the mute machine has fenced the first", len(other.starts), store.jobs[1].Run)
	}
}
