package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// RecordLateExit keeps the late exits the engine passes on
// (LateExitRecorder).
func (s *memStore) RecordLateExit(_ context.Context, ex job.Exit, back, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.late = append(s.late, lateSeen{ex, back})
	return true, nil
}

type lateSeen struct {
	ex   job.Exit
	back time.Time
}

// TestLateExitOfARunEndedAsLost: a machine lost while its job ran, the
// job requeued, then the machine back with the run's exit: the exit is
// passed on to the store once, with when the machine came back; a
// duplicate, and the exit of a run the engine did not end unseen, are
// not.
func TestLateExitOfARunEndedAsLost(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-time.Minute)
	store := newMemStore(
		Job{ID: 1, GPUs: 1, State: job.Running, Run: 1, Placement: []gpu.Ref{{Node: "cut", Index: 0}}, LastStartAt: &start, SubmittedAt: start},
		Job{ID: 2, GPUs: 1, State: job.Running, Run: 1, Placement: []gpu.Ref{{Node: "cut", Index: 1}}, LastStartAt: &start, SubmittedAt: start},
	)
	cut := newFakeNode("cut", 2)
	e, clock := newTestEngine(t, store, cut)
	e.runs[1] = &run{id: 1, parts: map[string]bool{"cut": true}}
	e.runs[2] = &run{id: 1, parts: map[string]bool{"cut": true}}
	removeNode(t, e, "cut")
	ended := clock.t.Add(500 * time.Millisecond) // job 1 ended while cut off
	clock.t = clock.t.Add(31 * time.Second)
	e.requeueLost(ctx, mustJobs(t, store), clock.t)
	if store.state(1) != job.Queued {
		t.Fatalf("job 1 = %s, want requeued", store.state(1))
	}
	clock.t = clock.t.Add(5 * time.Second)
	back := clock.t
	addNode(t, e, newFakeNode("cut", 2))
	ex := job.Exit{Node: "cut", JobID: 1, Run: 1, ExitCode: 0, At: ended}
	e.handleExit(ctx, ex)
	e.handleExit(ctx, ex) // sent again before the acknowledgement arrived
	e.handleExit(ctx, job.Exit{Node: "cut", JobID: 2, Run: 7, ExitCode: 0, At: ended})
	if len(store.late) != 1 || store.late[0].ex.Ref() != ex.Ref() || !store.late[0].ex.At.Equal(ended) || !store.late[0].back.Equal(back) {
		t.Errorf("late exits passed on: %+v; want job 1's once, the machine back at %v", store.late, back)
	}
}
