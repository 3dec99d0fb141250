package engine

import (
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
)

// TestPassAtRecheck checks, on the engine's fake clock, that the next
// pass is due at the scheduler's Recheck rather than at the next tick: a
// running tiresias-l job due to cross the 3,250 GPU-second threshold is
// demoted by a pass at that instant, not up to Interval late.
func TestPassAtRecheck(t *testing.T) {
	// 2 GPUs, 1,000 s run: 2,000 GPU-s, 1,250 short of queue 0's limit,
	// so it crosses 625 s after it starts again.
	store := newMemStore(Job{ID: 1, GPUs: 2, SimDuration: 5000, ExecutedS: 1000, AttainedService: 2000, SubmittedAt: t0})
	e, clock := newTestEngine(t, store, newFakeNode("n0", 4))
	sc, err := sched.New(sched.Config{Policy: "tiresias-l"})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	e.cfg.Interval = time.Second
	mustPass(t, e)
	due := t0.Add(625 * time.Second)
	if !e.recheck.Equal(due) {
		t.Fatalf("recheck %v, want %v", e.recheck, due)
	}
	cases := []struct {
		at   time.Time
		want time.Duration
	}{
		{t0, time.Second}, // far off: the ordinary interval
		{due.Add(-300 * time.Millisecond), 300 * time.Millisecond},
		{due, 0},
		{due.Add(time.Second), 0}, // overdue: at once
	}
	for _, c := range cases {
		if got := e.untilNextPass(c.at); got != c.want {
			t.Errorf("at %v: next pass in %v, want %v", c.at.Sub(t0), got, c.want)
		}
	}
	clock.t = due.Add(-300 * time.Millisecond)
	mustPass(t, e)
	if q := store.jobs[1].Queue; q.Index != 0 {
		t.Fatalf("demoted early: %+v", q)
	}
	clock.t = clock.t.Add(e.untilNextPass(clock.t))
	mustPass(t, e)
	if q := store.jobs[1].Queue; q.Index != 1 || q.Since != seconds(due) {
		t.Errorf("queue state %+v, want queue 1 since %v", q, seconds(due))
	}
}
