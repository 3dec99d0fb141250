package sim

import (
	"math"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TestHandover: a preempted job runs on and keeps its GPUs for HandoverS
// seconds, and the job that preempted it starts only then, as in the live
// engine.
func TestHandover(t *testing.T) {
	// A (2 GPUs, 100 s) reaches 100 GPU-seconds at t=50 and is demoted;
	// B (1 GPU, 30 s), waiting in queue 0, preempts it.
	demotion := []trace.Job{gj(1, 0, 2, 100), gj(2, 10, 1, 30)}
	cfg := sched.Config{Policy: "tiresias-l", Thresholds: []float64{100}}
	tests := []struct {
		name      string
		cluster   string
		handover  float64
		jct       map[int64]float64
		handovers int
	}{
		// B runs 50-80, A resumes at 80 and ends at 130 (TestGolden).
		{"no handover: B starts at the preemption", "1x2", 0, map[int64]float64{1: 130, 2: 70}, 0},
		// A runs on until it leaves its GPUs at 55, as a job saving a
		// checkpoint does live (its run counts until it exits): B runs
		// 55-85; A, with 45 s to go, resumes at 85 and ends at 130.
		{"B starts once A has left its GPUs", "1x2", 5, map[int64]float64{1: 130, 2: 75}, 1},
		// Counting mode, as the Tiresias reference places: the same times.
		{"counting GPUs", "1x2", 5, map[int64]float64{1: 130, 2: 75}, 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if i == 2 {
				c.Placement = "count"
			}
			r, jct := run(t, demotion, tc.cluster, Config{Sched: c, HandoverS: tc.handover})
			for id, want := range tc.jct {
				if got := jct[id]; math.Abs(got-want) > 1e-6 {
					t.Errorf("job %d: JCT %v, want %v", id, got, want)
				}
			}
			if r.Handovers != tc.handovers || (tc.handovers > 0 && math.Abs(r.HandoverMeanS-tc.handover) > 1e-6) {
				t.Errorf("handovers %d, mean %v s; want %d of %v s", r.Handovers, r.HandoverMeanS, tc.handovers, tc.handover)
			}
		})
	}
}
