package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

func TestFollowerCancelIsCarriedOutByTheLeader(t *testing.T) {
	ctx := context.Background()
	mem := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0}, Job{ID: 2, GPUs: 1, SubmittedAt: t0.Add(time.Second)},
		Job{ID: 3, GPUs: 4, SubmittedAt: t0.Add(2 * time.Second)})
	n := newFakeNode("n0", 2)
	leader, clock := newTestEngine(t, mem, n)
	mustPass(t, leader) // 1 and 2 run; 3 waits for 4 GPUs

	// The follower shares the store and runs no loop: its cancels are
	// requests, and never wait for a loop.
	follower, err := New(Config{Store: mem, Scheduler: leader.cfg.Scheduler, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	follower.SetFollower()
	for _, id := range []int64{1, 3} {
		if err := follower.Cancel(ctx, id, "cancelled by alice"); err != nil {
			t.Fatalf("cancel %d through the follower: %v", id, err)
		}
	}
	if got := mem.state(3); got != job.Cancelled {
		t.Errorf("waiting job cancelled through the follower: state %s, want cancelled", got)
	}
	if got := mem.state(1); got != job.Running || mem.jobs[1].CancelRequest == "" {
		t.Fatalf("running job: state %s, request %q; want running with a request", got, mem.jobs[1].CancelRequest)
	}

	mustPass(t, leader)
	if len(n.stops) != 1 || n.stops[0] != 1 {
		t.Fatalf("stops = %v, want [1]", n.stops)
	}
	mustPass(t, leader) // a second pass asks no second stop
	if len(n.stops) != 1 {
		t.Errorf("stops after another pass = %v, want [1]", n.stops)
	}
	leader.testExit(ctx, exit("n0", 1, -1, clock.t))
	if got := mem.state(1); got != job.Cancelled || mem.reason[1] != "cancelled by alice" {
		t.Errorf("job 1 = %s (%q), want cancelled by alice", got, mem.reason[1])
	}
	if got := mem.state(2); got != job.Running {
		t.Errorf("job 2 = %s, want it left running", got)
	}
}

func TestRequestedCancelOfARequeuedJob(t *testing.T) {
	mem := newMemStore(Job{ID: 1, GPUs: 8, SubmittedAt: t0, CancelRequest: "cancelled by bob"})
	e, _ := newTestEngine(t, mem, newFakeNode("n0", 2))
	mustPass(t, e)
	if got := mem.state(1); got != job.Cancelled {
		t.Errorf("waiting job with a cancel request: state %s, want cancelled", got)
	}
}
