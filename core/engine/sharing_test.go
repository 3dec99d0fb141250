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

func (s *memStore) MarkRequeued(_ context.Context, ref job.RunRef, rq job.Requeue) (job.RequeueOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := ref.Job
	j, err := s.current(ref)
	if err != nil {
		return job.RequeueOutcome{}, err
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
	return j.State.Waiting() && s.stalls[j.ID] >= job.MaxRequeueStalls && j.CancelRequest == ""
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
	if st := e.Stats(); st.Requeues != 1 || st.RequeuedBy[RequeueOutgrewLane] != 1 {
		t.Fatalf("requeues %d (%v), want 1 for outgrowing its lane", st.Requeues, st.RequeuedBy)
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
	for i := range job.MaxRequeueStalls {
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
		if i == job.MaxRequeueStalls-1 {
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
	if store.state(1) != job.Queued || len(n.starts) != job.MaxRequeueStalls {
		t.Fatalf("held job: state %s after %d starts, want queued after %d", store.state(1), len(n.starts), job.MaxRequeueStalls)
	}
	if r := store.reason[1]; !strings.HasPrefix(r, "held: requeued 5 times in a row") {
		t.Fatalf("reason %q", r)
	}
}
