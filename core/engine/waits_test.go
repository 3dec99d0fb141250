package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
)

// TestStatsWaitsAndCauses: a job's first start adds its submit-to-start
// time; every start adds the time the run waited, from the submission,
// from the end of a preempted run, or from the end of a retry's backoff;
// preemptions count by cause and team, reclaims by the reclaiming team,
// retries by cause.
func TestStatsWaitsAndCauses(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(Job{ID: 1, Team: "vision", GPUs: 1, SubmittedAt: t0.Add(-20 * time.Second), Retries: 1})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	e.cfg.MaxRetries = 1
	mustPass(t, e) // starts after 20 s
	vision := QueueTeam{Queue: 0, Team: "vision"}

	e.preempt(ctx, sched.Preempt{JobID: 1, Reason: "for a job in a higher queue"}, newPassJobs([]Job{{ID: 1, Team: "vision"}}))
	clock.t = t0.Add(5 * time.Second)
	e.testExit(ctx, exit("n0", 1, -1, clock.t))
	clock.t = t0.Add(12 * time.Second)
	mustPass(t, e) // starts again after waiting 7 s

	clock.t = t0.Add(20 * time.Second)
	e.testExit(ctx, exit("n0", 1, 3, clock.t)) // retried at t0+50s
	clock.t = t0.Add(60 * time.Second)
	mustPass(t, e) // starts 10 s after its backoff ended

	e.preempt(ctx, sched.Preempt{JobID: 1, For: 2, Reclaim: true}, newPassJobs([]Job{{ID: 1, Team: "vision"}, {ID: 2, Team: "nlp"}}))

	st := e.Stats()
	if h := st.SubmitToStart[vision]; h.Count != 1 || h.Sum != 20 {
		t.Errorf("submit to start: %d observations, sum %v; want 1 of 20 s", h.Count, h.Sum)
	}
	if h := st.QueueWait[vision]; h.Count != 3 || h.Sum != 20+7+10 {
		t.Errorf("queue wait: %d observations, sum %v; want 3 (20 s, 7 s, 10 s)", h.Count, h.Sum)
	}
	if c := st.QueueWait[vision].Cumulative(); c[5] != 0 || c[15] != 2 || c[30] != 3 {
		t.Errorf("queue wait buckets %v; want 0 up to 5 s, 2 up to 15 s, 3 up to 30 s", c)
	}
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"priority preemptions of vision", st.Preempted[CauseTeam{PreemptPriority, "vision"}], 1},
		{"reclaim preemptions of vision", st.Preempted[CauseTeam{PreemptReclaim, "vision"}], 1},
		{"reclaims by nlp", st.Reclaimed["nlp"], 1},
		{"preemptions", st.Preemptions, 2},
		{"reclaims", st.Reclaims, 1},
		{"retries after an exit code", st.RetriedBy[RetryExitCode], 1},
		{"retries after an error", st.RetriedBy[RetryError], 0},
		{"starts", st.Starts, 3},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	if st.PassTime.Count != uint64(st.Passes) || len(st.PassTime.Bounds) != len(PassBuckets()) {
		t.Errorf("pass time: %d observations in %d buckets; want one per pass (%d)", st.PassTime.Count, len(st.PassTime.Bounds), st.Passes)
	}
	if len(e.waiting) != 0 {
		t.Errorf("waits kept for running jobs: %v", e.waiting)
	}
}

// TestForgetWaits: a job that waited again and was cancelled leaves no
// note behind; a job that waited again before the server started has no
// known queue wait.
func TestForgetWaits(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0, Run: 2, State: "preempted"})
	e, clock := newTestEngine(t, store)
	e.waitFrom(9, t0) // cancelled meanwhile: not in the store
	mustPass(t, e)
	if _, ok := e.waiting[9]; ok {
		t.Errorf("a finished job's wait is kept")
	}
	e.observeStart(*store.jobs[1], clock.t.Add(time.Minute))
	st := e.Stats()
	if h := st.QueueWait[QueueTeam{}]; h.Count != 0 {
		t.Errorf("a wait from before the server started was counted: %+v", h)
	}
	if h := st.SubmitToStart[QueueTeam{}]; h.Count != 0 {
		t.Errorf("a second run counted as a first: %+v", h)
	}
}

func TestHistogramBuckets(t *testing.T) {
	h := newHistogram([]float64{1, 5})
	for _, v := range []float64{0.5, 1, 3, 5, 7} {
		h.observe(v)
	}
	c := h.Cumulative()
	if c[1] != 2 || c[5] != 4 || h.Count != 5 || h.Sum != 16.5 {
		t.Errorf("buckets %v, count %d, sum %v; want 2 up to 1, 4 up to 5, 5 in all, sum 16.5", c, h.Count, h.Sum)
	}
}
