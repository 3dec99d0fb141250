package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// oneRunning is a store whose job 1 (with j's limits and retries) has run
// run 1 on n0's one GPU since start, and n0 reporting it.
func oneRunning(start time.Time, j Job) (*memStore, *fakeNode) {
	j.ID, j.GPUs, j.State, j.Placement = 1, 1, job.Running, []gpu.Ref{{Node: "n0", Index: 0}}
	j.LastStartAt, j.SubmittedAt = &start, start
	n := newFakeNode("n0", 1)
	n.running[1] = 1
	return newMemStore(j), n
}

// callOnce runs f as an engine call (Cancel, Preempt, AddNode,
// RemoveNode), serving that one call on the test's goroutine.
func callOnce(t *testing.T, e *Engine, f func(context.Context) error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f(context.Background()) }()
	(<-e.calls)(context.Background())
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStopRequestOutlivesTheServer: a run asked to stop (preempted,
// cancelled, past its time limit) goes on saving its work while the
// server restarts or its machine reconnects; its exit, however it exits,
// ends the job as the request said, not as a run that ended on its own
// (exit 0 read as success, a SIGTERM's code as a failure to retry).
func TestStopRequestOutlivesTheServer(t *testing.T) {
	tests := []struct {
		name string
		ask  func(*testing.T, *Engine, *fakeClock)
		// passFirst: the new server's first pass runs before the exit.
		passFirst bool
		// reconnect: the machine reconnects to the same server instead.
		reconnect bool
		code      int
		want      job.State
	}{
		{name: "preempted, exits 0 before the new server's first pass", ask: preemptOne, code: 0, want: job.Preempted},
		{name: "preempted, exits 0 after the new server's first pass", ask: preemptOne, passFirst: true, code: 0, want: job.Preempted},
		{name: "preempted, killed by the grace period", ask: preemptOne, code: -1, want: job.Preempted},
		{name: "preempted, its machine reconnects", ask: preemptOne, reconnect: true, code: 0, want: job.Preempted},
		{name: "cancelled, exits 143", ask: cancelOne, code: 143, want: job.Cancelled},
		{name: "cancelled, exits 0 after the first pass", ask: cancelOne, passFirst: true, code: 0, want: job.Cancelled},
		{name: "past its time limit, exits 0", ask: limitOne, code: 0, want: job.TimedOut},
		{name: "past its time limit, machine reconnects", ask: limitOne, reconnect: true, code: 1, want: job.TimedOut},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			start := t0.Add(-time.Hour)
			store, n := oneRunning(start, Job{TimeLimit: 2 * time.Hour, Retries: 3})
			e, clock := newTestEngine(t, store, n)
			mustPass(t, e)
			tc.ask(t, e, clock)
			if len(n.stops) != 1 {
				t.Fatalf("stops = %v, want job 1 asked to stop", n.stops)
			}
			asked := clock.t
			stopsBefore := len(n.stops)

			if tc.reconnect {
				clock.t = clock.t.Add(3 * time.Second)
				callOnce(t, e, func(ctx context.Context) error { return e.RemoveNode(ctx, "n0") })
				clock.t = clock.t.Add(2 * time.Second)
				callOnce(t, e, func(ctx context.Context) error { return e.AddNode(ctx, n) })
			} else {
				// The server restarts: a new engine on the same store, to
				// which the machine reconnects with the run still saving.
				e2, clock2 := newTestEngine(t, store)
				clock2.t = clock.t.Add(5 * time.Second)
				e, clock = e2, clock2
				callOnce(t, e, func(ctx context.Context) error { return e.AddNode(ctx, n) })
			}
			if tc.passFirst {
				mustPass(t, e)
				if len(n.stops) == stopsBefore {
					t.Errorf("the run was not asked to stop again after the restart")
				}
			}
			delete(n.running, 1)
			clock.t = clock.t.Add(time.Second)
			e.testExit(ctx, exit("n0", 1, tc.code, clock.t))
			if !tc.passFirst {
				mustPass(t, e) // the adopted run's exit waits for its read of the store
			}
			if got := store.state(1); got != tc.want {
				t.Fatalf("job 1 ended %s (%q), want %s", got, store.reason[1], tc.want)
			}
			if tc.want == job.Preempted {
				// The handover (from the request to the exit) counts for
				// no rank: the queue counts the hour before the request.
				if got, want := store.jobs[1].Queue.CycleService, asked.Sub(start).Seconds(); got > want+0.5 {
					t.Errorf("cycle service %.1f s, want at most %.1f (the handover left out)", got, want)
				}
			}
		})
	}
}

func preemptOne(t *testing.T, e *Engine, _ *fakeClock) {
	callOnce(t, e, func(ctx context.Context) error { return e.Preempt(ctx, 1, "reclaimed for job 2") })
}

func cancelOne(t *testing.T, e *Engine, _ *fakeClock) {
	callOnce(t, e, func(ctx context.Context) error { return e.Cancel(ctx, 1, "cancelled by alice") })
}

// limitOne moves the clock past job 1's time limit and runs a pass.
func limitOne(t *testing.T, e *Engine, clock *fakeClock) {
	clock.t = clock.t.Add(time.Hour + time.Second)
	mustPass(t, e)
}

func (s *memStore) MarkStopping(_ context.Context, id int64, req job.StopRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.current(job.RunRef{Job: id, Run: req.Run})
	if err != nil {
		return err
	}
	j.Stop = &req
	return nil
}

// TestLostRunEndsAsAsked: a run asked to stop whose machine is lost for
// good ends its job as the request said: a cancelled job is not started
// again, a preempted one counts as preempted.
func TestLostRunEndsAsAsked(t *testing.T) {
	tests := []struct {
		name string
		ask  func(*testing.T, *Engine, *fakeClock)
		want job.State
	}{
		{"cancelled", cancelOne, job.Cancelled},
		{"preempted", preemptOne, job.Preempted},
		{"past its time limit", limitOne, job.TimedOut},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := t0.Add(-time.Hour)
			store, n := oneRunning(start, Job{TimeLimit: 2 * time.Hour})
			e, clock := newTestEngine(t, store, n)
			mustPass(t, e)
			tc.ask(t, e, clock)
			callOnce(t, e, func(ctx context.Context) error { return e.RemoveNode(ctx, "n0") })
			clock.t = clock.t.Add(time.Minute) // past LostAfter
			mustPass(t, e)
			if got := store.state(1); got != tc.want {
				t.Fatalf("job 1 = %s (%q), want %s", got, store.reason[1], tc.want)
			}
			if r := store.reason[1]; !strings.Contains(r, "not seen to end: node n0 lost, not back after") {
				t.Errorf("reason %q does not say the run was lost", r)
			}
			// Its machine comes back with the run: it is stopped, not resumed.
			callOnce(t, e, func(ctx context.Context) error { return e.AddNode(ctx, n) })
			mustPass(t, e)
			if got := store.state(1); got != tc.want {
				t.Errorf("after its machine came back: job 1 = %s, want %s", got, tc.want)
			}
			if last := n.stops[len(n.stops)-1]; len(n.stops) < 2 || last != 1 {
				t.Errorf("stops = %v, want the run asked to stop again", n.stops)
			}
		})
	}
}

// TestAdoptedRunKeepsItsRetries: a run adopted after a restart that
// fails on its own is retried as its job asked, as if this engine had
// started it.
func TestAdoptedRunKeepsItsRetries(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-time.Hour)
	store, n := oneRunning(start, Job{Retries: 2})
	e, clock := newTestEngine(t, store)
	e.cfg.MaxRetries = 3
	callOnce(t, e, func(ctx context.Context) error { return e.AddNode(ctx, n) })
	delete(n.running, 1)
	e.testExit(ctx, exit("n0", 1, 3, clock.t))
	if got := store.state(1); got != job.Running {
		t.Fatalf("the exit was recorded before the store was read: job 1 = %s", got)
	}
	mustPass(t, e)
	if got := store.state(1); got != job.Queued || store.jobs[1].RetryAt == nil {
		t.Fatalf("job 1 = %s (%q), want queued for a retry", got, store.reason[1])
	}
}

// TestCancelledLeavingJobIsNotForecastToWaitAgain: job 1, cancelled,
// saves its work for up to the 10 s grace period; job 2 waits for its
// GPUs. The forecast has job 2 start once job 1 is out, not after job 1
// (the older job, first under fifo) has run again.
func TestCancelledLeavingJobIsNotForecastToWaitAgain(t *testing.T) {
	e, _, _ := jobBehindRunning(t)
	sc, err := sched.New(sched.Config{Policy: "fifo", HandoverS: 10})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	mustPass(t, e)
	for _, c := range []struct {
		name string
		ask  func(*testing.T, *Engine, *fakeClock)
		want time.Duration // after t0
	}{
		// Preempted, it waits again and goes first (every run took 100 s;
		// it has 10 s left): job 2 starts after that.
		{"preempted", preemptOne, 20 * time.Second},
		{"cancelled", cancelOne, 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.runs[1]
			r.stop, r.stopAsked, r.stopKept = "", time.Time{}, ""
			c.ask(t, e, nil)
			e.fc.lastAt = time.Time{} // a forecast at this pass
			mustPass(t, e)
			got, ok := e.Forecast(2)
			if want := t0.Add(c.want); !ok || got.State != forecast.StateExpected || !got.Likely.Equal(want) {
				t.Errorf("job 2's forecast %+v (%v); want likely %v", got, ok, want)
			}
		})
	}
}

// stopsRefused is a store that cannot take stop requests while refuse is
// set, as with its database out.
type stopsRefused struct {
	*memStore
	refuse bool
}

func (s *stopsRefused) MarkStopping(ctx context.Context, id int64, req job.StopRequest) error {
	if s.refuse {
		return errors.New("database is out")
	}
	return s.memStore.MarkStopping(ctx, id, req)
}

// TestStopRequestRefusedIsSavedLater: the store is out when job 1 is
// preempted; the next pass, the store back, records the request, so a
// restart after it still ends the job preempted.
func TestStopRequestRefusedIsSavedLater(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-time.Hour)
	mem, n := oneRunning(start, Job{})
	e, clock := newTestEngine(t, mem, n)
	store := &stopsRefused{memStore: mem, refuse: true}
	e.cfg.Store = store
	mustPass(t, e)
	preemptOne(t, e, clock)
	if mem.jobs[1].Stop != nil {
		t.Fatalf("the store took the request while out: %+v", mem.jobs[1].Stop)
	}
	store.refuse = false
	mustPass(t, e)
	if s := mem.jobs[1].Stop; s == nil || s.To != job.Preempted || s.Run != 1 {
		t.Fatalf("after the store came back: request %+v, want run 1 preempted", s)
	}
	e2, clock2 := newTestEngine(t, mem)
	clock2.t = clock.t.Add(5 * time.Second)
	callOnce(t, e2, func(ctx context.Context) error { return e2.AddNode(ctx, n) })
	delete(n.running, 1)
	e2.testExit(ctx, exit("n0", 1, 0, clock2.t))
	mustPass(t, e2)
	if got := mem.state(1); got != job.Preempted {
		t.Errorf("job 1 ended %s, want preempted", got)
	}
}
