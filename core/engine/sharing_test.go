package engine

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
)

func (s *memStore) MarkRequeued(_ context.Context, ref job.RunRef, rq Requeue) (RequeueOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := ref.Job
	j, err := s.current(ref)
	if err != nil {
		return RequeueOutcome{}, err
	}
	if s.stalls == nil {
		s.stalls = make(map[int64]int)
	}
	out := rq.Outcome(j.Memory, s.stalls[id])
	j.ExecutedS += rq.At.Sub(*j.LastStartAt).Seconds()
	j.State, j.Placement, j.Memory, j.RetryAt = job.Queued, nil, rq.Estimate, out.RetryAt
	s.stalls[id] = out.Stalls
	s.reason[id] = out.Reason
	return out, nil
}

// held tells whether the store holds j, as models.Job.Held: the engine
// never sees it, unless it is to be cancelled. The caller holds s.mu.
func (s *memStore) held(j *Job) bool {
	return j.State.Waiting() && s.stalls[j.ID] >= MaxRequeueStalls && j.CancelRequest == ""
}

func TestSharingSnapshot(t *testing.T) {
	// The fake node's GPUs have 80 GiB; padding: P' = ceil(1.1 P),
	// T' = ceil(1.05 (P' + E)), E' = T' - P'.
	declared := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000, Source: memest.Declared}
	tests := []struct {
		name    string
		job     Job
		sharing bool
		p, e    int64
	}{
		{"declared estimate padded", Job{GPUs: 1, Sharing: true, Memory: declared}, true, 1100, 5355 - 1100},
		// A quarter of 81,920 MiB is 20,480: P 20% of it, E the rest.
		{"fraction of the smallest GPU", Job{GPUs: 1, Sharing: true, GPUFraction: 0.25, Command: []string{"train"}}, true, 4506, 21935 - 4506},
		{"declared total split", Job{GPUs: 1, Sharing: true, GPUMemMiB: 10240, Command: []string{"train"}}, true, 2253, 10968 - 2253},
		{"two GPUs never share", Job{GPUs: 2, Sharing: true, Memory: declared}, false, 0, 0},
		{"not opted in", Job{GPUs: 1, Memory: declared}, false, 0, 0},
		{"command with no estimate runs unshared", Job{GPUs: 1, Sharing: true, Command: []string{"train"}}, false, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job
			j.ID, j.SubmittedAt = 1, t0
			e, _ := newTestEngine(t, newMemStore(j), newFakeNode("n1", 2))
			snap, _ := e.snapshot([]Job{j}, t0)
			sj := snap.Jobs[0]
			if sj.Sharing != tc.sharing || sj.MemPersistentMiB != tc.p || sj.MemEphemeralMiB != tc.e {
				t.Fatalf("sharing %v P %d E %d, want %v %d %d", sj.Sharing, sj.MemPersistentMiB, sj.MemEphemeralMiB, tc.sharing, tc.p, tc.e)
			}
		})
	}
}

func TestSharingSpec(t *testing.T) {
	est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000, Source: memest.Catalogue}
	store := newMemStore(
		Job{ID: 1, GPUs: 1, Sharing: true, Memory: est, SimDuration: 100, SubmittedAt: t0},
		Job{ID: 2, GPUs: 1, Command: []string{"train"}, SubmittedAt: t0.Add(time.Second)},
	)
	n := newFakeNode("n1", 2)
	e, _ := newTestEngine(t, store, n)
	mustPass(t, e)
	if len(n.starts) != 2 {
		t.Fatalf("%d starts, want 2", len(n.starts))
	}
	s := n.starts[0]
	if s.Sharing == nil || s.Sharing.Memory != est || s.Sharing.DurationS != 100 {
		t.Fatalf("sharing job's spec: %+v, want the unpadded estimate %+v and 100 s", s.Sharing, est)
	}
	if s.Memory.PersistentMiB != 1000 || s.Memory.EphemeralMiB != 4000 {
		t.Fatalf("simulated memory %+v, want the estimate", s.Memory)
	}
	if n.starts[1].Sharing != nil {
		t.Fatalf("a job that did not opt in got %+v", n.starts[1].Sharing)
	}
}

func TestOutgrownLaneRequeues(t *testing.T) {
	est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000, Source: memest.Declared}
	store := newMemStore(Job{ID: 1, GPUs: 1, Sharing: true, Memory: est, Command: []string{"train"}, SubmittedAt: t0})
	n := newFakeNode("n1", 1)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	if store.state(1) != job.Running {
		t.Fatalf("state %s, want running", store.state(1))
	}
	clock.t = t0.Add(time.Minute)
	bigger := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 9000, Source: memest.Measured}
	ex := exit("n1", 1, -1, clock.t)
	ex.Err, ex.Requeue = "stopped by the agent: job 1 outgrew its Salus lane", &bigger
	delete(n.running, 1)
	e.testExit(context.Background(), ex)

	j := store.jobs[1]
	if j.State != job.Queued || j.Failures != 0 || j.RetryAt != nil {
		t.Fatalf("state %s, failures %d, retry at %v: want queued, no failure, no backoff", j.State, j.Failures, j.RetryAt)
	}
	if j.Memory != bigger {
		t.Fatalf("estimate %+v, want %+v", j.Memory, bigger)
	}
	if r := store.reason[1]; !strings.HasPrefix(r, "outgrew its lane: requeued with E=9000 MiB") {
		t.Fatalf("reason %q", r)
	}
	if got := e.Stats().Requeues; got != 1 {
		t.Fatalf("requeues %d, want 1", got)
	}
	// The next pass starts it again with the larger estimate.
	mustPass(t, e)
	if len(n.starts) != 2 || n.starts[1].Sharing == nil || n.starts[1].Sharing.Memory != bigger {
		t.Fatalf("restart: %+v", n.starts)
	}
}

func TestOutgrownLaneAfterStopIsNotRequeued(t *testing.T) {
	// A job cancelled while the gate stopped it stays cancelled.
	est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000}
	store := newMemStore(Job{ID: 1, GPUs: 1, Sharing: true, Memory: est, Command: []string{"train"}, SubmittedAt: t0})
	n := newFakeNode("n1", 1)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	e.runs[1].stop, e.runs[1].reason = job.Cancelled, "cancelled by alice"
	clock.t = t0.Add(time.Minute)
	ex := exit("n1", 1, -1, clock.t)
	ex.Requeue = &memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 9000}
	e.testExit(context.Background(), ex)
	if store.state(1) != job.Cancelled {
		t.Fatalf("state %s, want cancelled", store.state(1))
	}
}

// TestRequeueOutcome: a requeue that brings a larger estimate makes
// progress; one that does not is a stall, which backs off, doubling, and
// the fifth in a row holds the job, saying what to do.
func TestRequeueOutcome(t *testing.T) {
	started := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4096, Source: memest.Declared}
	same := started
	same.Source = memest.Measured
	at := t0.Add(time.Hour)
	rq := func(est memest.Estimate) Requeue {
		return Requeue{Estimate: est, Node: "n1", At: at, Backoff: 10 * time.Second}
	}
	tests := []struct {
		name       string
		est        memest.Estimate
		stalls     int // before
		wantStalls int
		wantWait   time.Duration // 0: no RetryAt
		wantHeld   bool
		wantReason string
	}{
		{"a larger E is progress", memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 9000}, 3, 0, 0, false,
			"outgrew its lane: requeued with E=9000 MiB, P=1000 MiB (on n1)"},
		{"a larger P is progress", memest.Estimate{PersistentMiB: 1200, EphemeralMiB: 4096}, 0, 0, 0, false,
			"outgrew its lane: requeued with E=4096 MiB, P=1200 MiB (on n1)"},
		{"the same estimate is a stall", same, 0, 1, 10 * time.Second, false,
			"outgrew its lane again with no larger estimate (E=4096 MiB, P=1000 MiB, on n1): requeue 1 of 5 without progress before it is held; next try at 13:00:10"},
		{"a smaller estimate is a stall", memest.Estimate{PersistentMiB: 900, EphemeralMiB: 4000}, 0, 1, 10 * time.Second, false, "requeue 1 of 5"},
		{"the backoff doubles", same, 3, 4, 80 * time.Second, false, "requeue 4 of 5 without progress before it is held; next try at 13:01:20"},
		{"the fifth stall holds the job", same, 4, 5, 0, true,
			"held: requeued 5 times in a row for outgrowing its lane with no larger estimate (E=4096 MiB, P=1000 MiB, last on n1), " +
				"so another run would end the same way; cancel it and submit it again with --mem-ephemeral-mib above 4096, or without --share"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := rq(tc.est).Outcome(started, tc.stalls)
			if out.Stalls != tc.wantStalls || out.Held != tc.wantHeld || !strings.Contains(out.Reason, tc.wantReason) {
				t.Errorf("outcome %+v; want %d stalls, held %v, a reason with %q", out, tc.wantStalls, tc.wantHeld, tc.wantReason)
			}
			switch {
			case tc.wantWait == 0 && out.RetryAt != nil:
				t.Errorf("retry at %v, want none", out.RetryAt)
			case tc.wantWait > 0 && (out.RetryAt == nil || !out.RetryAt.Equal(at.Add(tc.wantWait))):
				t.Errorf("retry at %v, want %v", out.RetryAt, at.Add(tc.wantWait))
			}
		})
	}
}

// TestRequeueWithoutProgressIsHeld drives issue 15's loop through the
// engine: a job stopped again and again for outgrowing its lane, each
// time with the estimate it started with, waits longer and longer before
// each start, and after the fifth such requeue is never started again.
func TestRequeueWithoutProgressIsHeld(t *testing.T) {
	est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4096, Source: memest.Declared}
	store := newMemStore(Job{ID: 1, GPUs: 1, Sharing: true, Memory: est, Command: []string{"train"}, SubmittedAt: t0})
	n := newFakeNode("n1", 1)
	e, clock := newTestEngine(t, store, n)
	ctx := context.Background()
	var waits []time.Duration
	for i := range MaxRequeueStalls {
		mustPass(t, e)
		if store.state(1) != job.Running {
			t.Fatalf("requeue %d: state %s, want running", i, store.state(1))
		}
		clock.t = clock.t.Add(5 * time.Second)
		again := est
		again.Source = memest.Measured
		ex := exit("n1", 1, -1, clock.t)
		ex.Err, ex.Requeue = "stopped by the agent: job 1 outgrew its Salus lane", &again
		delete(n.running, 1)
		e.testExit(ctx, ex)
		if store.state(1) != job.Queued || store.jobs[1].Failures != 0 {
			t.Fatalf("requeue %d: state %s, %d failures; want queued, none", i, store.state(1), store.jobs[1].Failures)
		}
		retry := store.jobs[1].RetryAt
		if i == MaxRequeueStalls-1 {
			if retry != nil {
				t.Fatalf("held job retries at %v", retry)
			}
			break
		}
		// Not started before its backoff ends, started once it has.
		waits = append(waits, retry.Sub(clock.t))
		clock.t = retry.Add(-time.Second)
		mustPass(t, e)
		if store.state(1) != job.Queued {
			t.Fatalf("requeue %d: started a second before its backoff ends", i)
		}
		clock.t = *retry
	}
	if want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute}; !slices.Equal(waits, want) {
		t.Fatalf("backoffs %v, want %v", waits, want)
	}
	clock.t = clock.t.Add(24 * time.Hour)
	mustPass(t, e)
	if store.state(1) != job.Queued || len(n.starts) != MaxRequeueStalls {
		t.Fatalf("held job: state %s after %d starts, want queued after %d", store.state(1), len(n.starts), MaxRequeueStalls)
	}
	if r := store.reason[1]; !strings.HasPrefix(r, "held: requeued 5 times in a row") {
		t.Fatalf("reason %q", r)
	}
}
