package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// TestEngineReservation: the engine passes the core's reservation on. Two
// 1-GPU jobs hold a 4-GPU machine's GPUs 0 and 1 until their limits (10
// and 20 minutes from now); a 4-GPU job has waited 10 minutes, past a
// bound of 5; a 1-GPU job without a limit arrives. The 4-GPU job's reason
// names its GPUs and the clock time they are expected free, the 1-GPU job
// may not take the 2 free GPUs, and Reservation gives the reservation.
func TestEngineReservation(t *testing.T) {
	jobs := []Job{
		{ID: 1, GPUs: 1, SimDuration: 10000, SubmittedAt: t0.Add(-20 * time.Minute), TimeLimit: 20 * time.Minute},
		{ID: 2, GPUs: 1, SimDuration: 10000, SubmittedAt: t0.Add(-20 * time.Minute), TimeLimit: 30 * time.Minute},
		{ID: 3, GPUs: 4, SimDuration: 100, SubmittedAt: t0.Add(-10 * time.Minute)},
		{ID: 4, GPUs: 1, SimDuration: 100, SubmittedAt: t0},
	}
	mem := newMemStore(jobs[:2]...)
	n := newFakeNode("n0", 4)
	e, clock := newTestEngine(t, mem, n)
	sc, err := sched.New(sched.Config{Policy: "fjf", ReserveAfterS: 300})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	// Jobs 1 and 2 started 10 minutes ago, on GPUs 0 and 1.
	clock.t = t0.Add(-10 * time.Minute)
	mustPass(t, e)
	if mem.state(1) != job.Running || mem.state(2) != job.Running {
		t.Fatalf("jobs 1 and 2 are %s and %s, want running", mem.state(1), mem.state(2))
	}
	mem.mu.Lock()
	for _, j := range jobs[2:] {
		j.State = job.Queued
		mem.jobs[j.ID] = &j
	}
	mem.mu.Unlock()
	clock.t = t0
	mustPass(t, e)
	if mem.state(3) != job.Queued || mem.state(4) != job.Queued {
		t.Fatalf("jobs 3 and 4 are %s and %s, want both waiting", mem.state(3), mem.state(4))
	}
	r, from, ok := e.Reservation(3)
	if !ok || r.Count != 4 || len(r.GPUs) != 4 || !from.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("reservation %+v from %v, %v; want 4 GPUs of n0 from %v", r, from, ok, t0.Add(20*time.Minute))
	}
	want := "GPUs n0:0-3 reserved for you from " + t0.Add(20*time.Minute).Local().Format("15:04")
	if got := e.Waits()[3].Reason; !strings.Contains(got, want) {
		t.Errorf("job 3 waits %q, want it to say %q", got, want)
	}
	if got := e.Waits()[4].Reason; !strings.Contains(got, "2 free GPUs held for job 3's reservation") {
		t.Errorf("job 4 waits %q", got)
	}
	if _, _, ok := e.Reservation(4); ok {
		t.Error("job 4 holds a reservation")
	}
}
