package agent

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

// Two simulated jobs that opted in share one 8 GiB GPU: too large for a
// lane each, they take turns in one lane. Between their iterations the
// GPU holds only their persistent memory; at no sample does it hold both
// jobs' ephemeral memory; both finish.
func TestSharedSimJobsTakeTurnsInOneLane(t *testing.T) {
	work, err := os.MkdirTemp("", "gps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	sim := gpu.NewSim("n0", 1, 8192)
	exits := make(chan job.Exit, 4)
	a, err := New(Config{Name: "n0", Backend: sim, WorkDir: work, Grace: time.Second,
		Gate: &lanes.Config{}, Logger: quiet}, exits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000} // padded 1100 + 4255: two share a lane
	mem := gpu.SimMemory{PersistentMiB: 1000, EphemeralMiB: 4000, Iteration: 100 * time.Millisecond}
	for _, id := range []int64{1, 2} {
		err := a.Start(context.Background(), job.Spec{JobID: id, GPUs: []int{0}, SimRemaining: time.Second,
			Memory: mem, Sharing: &job.Sharing{Memory: est}})
		if err != nil {
			t.Fatal(err)
		}
	}
	v := a.Lanes()
	if len(v) != 1 || len(v[0].Lanes) != 1 || len(v[0].Lanes[0].Jobs) != 2 {
		t.Fatalf("lanes %+v, want one lane of both jobs", v)
	}
	deadline := time.After(10 * time.Second)
	done := 0
	var maxUsed int64
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for done < 2 {
		select {
		case ex := <-exits:
			if ex.ExitCode != 0 || ex.Requeue != nil {
				t.Fatalf("job %d ended %+v", ex.JobID, ex)
			}
			done++
		case now := <-tick.C:
			if s := a.Sample(now)[0]; done == 0 {
				maxUsed = max(maxUsed, s.MemUsedMiB)
				if s.MemUsedMiB > 2000+4000 {
					t.Fatalf("%d MiB used: both jobs' ephemeral memory at once", s.MemUsedMiB)
				}
			}
		case <-deadline:
			t.Fatal("the shared jobs did not finish")
		}
	}
	if maxUsed <= 2000 {
		t.Fatalf("at most %d MiB used: no iteration's ephemeral memory was seen", maxUsed)
	}
	if v := a.Lanes(); len(v[0].Lanes) != 0 {
		t.Fatalf("lanes after both ended: %+v", v[0].Lanes)
	}
}

// A shared simulated job that is stopped ends at once, and its lane is
// freed.
func TestSharedSimJobStops(t *testing.T) {
	work, err := os.MkdirTemp("", "gps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	exits := make(chan job.Exit, 4)
	a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 8192), WorkDir: work, Grace: time.Second,
		Gate: &lanes.Config{}, Logger: quiet}, exits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	err = a.Start(context.Background(), job.Spec{JobID: 1, GPUs: []int{0}, SimRemaining: time.Hour,
		Memory:  gpu.SimMemory{PersistentMiB: 1000, EphemeralMiB: 1000, Iteration: time.Second},
		Sharing: &job.Sharing{Memory: memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 1000}}})
	if err != nil {
		t.Fatal(err)
	}
	_ = a.Stop(context.Background(), job.RunRef{Job: 1})
	select {
	case ex := <-exits:
		if ex.ExitCode != -1 {
			t.Fatalf("exit %+v", ex)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stopped job did not end")
	}
	if v := a.Lanes(); len(v[0].Lanes) != 0 {
		t.Fatalf("lanes after stop: %+v", v[0].Lanes)
	}
}
