package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// countingStore counts the passes' loads of the unfinished jobs.
type countingStore struct {
	*memStore
	loads chan struct{}
}

func (s *countingStore) UnfinishedEngineJobs(ctx context.Context) ([]Job, error) {
	s.loads <- struct{}{}
	return s.memStore.UnfinishedEngineJobs(ctx)
}

// TestExitsCoalesceIntoOnePass sends the ends of five runs before the
// loop runs: it records every one, in the order they came, and then runs
// one pass for all of them, not one each.
func TestExitsCoalesceIntoOnePass(t *testing.T) {
	var jobs []Job
	for id := int64(1); id <= 5; id++ {
		jobs = append(jobs, Job{ID: id, GPUs: 1, State: job.Running, Run: 1, SubmittedAt: t0, LastStartAt: &t0,
			Placement: []gpu.Ref{{Node: "n0", Index: int(id - 1)}}})
	}
	store := &countingStore{memStore: newMemStore(jobs...), loads: make(chan struct{}, 100)}
	n := newFakeNode("n0", 8)
	for _, j := range jobs {
		n.running[j.ID] = j.Run
	}
	sc, err := sched.New(sched.Config{Policy: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Store: store, Scheduler: sc, Interval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		e.runs[j.ID] = &run{id: 1, parts: map[string]bool{"n0": true}}
	}
	e.nodes["n0"] = n
	var order []int64
	recorded := make(chan int64, len(jobs))
	for _, j := range jobs {
		ex := exit("n0", j.ID, 0, t0)
		ex.Run = 1
		ex.Recorded = func() { recorded <- ex.JobID }
		e.exits <- ex
	}
	e.Wake()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	for range jobs {
		select {
		case id := <-recorded:
			order = append(order, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("exits recorded: %v of 5", order)
		}
	}
	select {
	case <-store.loads:
	case <-time.After(10 * time.Second):
		t.Fatal("no pass after the exits")
	}
	// Anything after this would be a second pass, which the Interval of
	// an hour leaves no reason for: stop the loop and count.
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if extra := len(store.loads); extra != 0 {
		t.Errorf("%d more passes after the first: five exits and a wake need one", extra)
	}
	for i, id := range order {
		if id != int64(i+1) {
			t.Fatalf("exits recorded in the order %v, want 1 to 5", order)
		}
	}
	for _, j := range jobs {
		if got := store.state(j.ID); got != job.Succeeded {
			t.Errorf("job %d is %s, want succeeded", j.ID, got)
		}
	}
	if got := e.Stats().Coalesced; got != 5 {
		t.Errorf("Coalesced = %d, want 5 (four exits and a wake joined the first exit's pass)", got)
	}
}
