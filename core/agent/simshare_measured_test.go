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

// A shared simulated job declared E 4,000 MiB but peaks at 2,500 each
// iteration: stopped (as for a preemption) after a few iterations, its
// exit carries the measured estimate, unpadded, for its next run.
func TestStoppedSharedJobReportsMeasured(t *testing.T) {
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
		Memory:  gpu.SimMemory{PersistentMiB: 1000, EphemeralMiB: 2500, Iteration: 10 * time.Millisecond},
		Sharing: &job.Sharing{Memory: memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000, Source: memest.Declared}}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v := a.Lanes(); len(v[0].Lanes) == 1 && v[0].Lanes[0].Jobs[0].MeasuredPeaks >= memest.MinSamples {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d iterations in 5 s: %+v", memest.MinSamples, a.Lanes())
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = a.Stop(context.Background(), job.RunRef{Job: 1})
	select {
	case ex := <-exits:
		want := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 2500, Source: memest.Measured}
		if ex.Measured == nil || *ex.Measured != want || ex.Requeue != nil {
			t.Fatalf("exit %+v (measured %+v), want measured %+v", ex, ex.Measured, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stopped job did not end")
	}
}
