package gpu

import (
	"testing"
	"time"
)

func TestSimMemoryFollowsIterations(t *testing.T) {
	m := SimMemory{PersistentMiB: 1000, EphemeralMiB: 600, Iteration: 10 * time.Second}
	tests := []struct {
		name    string
		elapsed time.Duration
		want    int64
	}{
		{"iteration start holds only persistent memory", 0, 1000},
		{"peak at the end of the forward pass", 6 * time.Second, 1600},
		{"half way up", 3 * time.Second, 1300},
		{"half way down", 8 * time.Second, 1300},
		{"next iteration starts over", 10 * time.Second, 1000},
	}
	for _, tc := range tests {
		if got := m.At(tc.elapsed); got != tc.want {
			t.Errorf("%s: At(%v) = %d, want %d", tc.name, tc.elapsed, got, tc.want)
		}
	}
}

func TestSimSamplesAttachedJobs(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewSim("node-0", 2, 8192)
	s.Attach(7, []int{1}, SimMemory{PersistentMiB: 2000}, t0)
	s.Attach(8, []int{1}, SimMemory{PersistentMiB: 7000}, t0)
	got := s.Sample(t0.Add(time.Second))
	if len(got) != 2 || got[0].MemUsedMiB != 0 || got[0].UtilPct != 0 {
		t.Fatalf("idle GPU sample = %+v", got)
	}
	if got[1].MemUsedMiB != 8192 || len(got[1].Jobs) != 2 || got[1].Jobs[1].MemMiB != 6192 {
		t.Errorf("shared GPU must be capped at its capacity: %+v", got[1])
	}
	s.Detach(7)
	s.Detach(8)
	if got := s.Sample(t0); got[1].MemUsedMiB != 0 {
		t.Errorf("after detach: %+v", got[1])
	}
}

// TestSimUtilization checks the simulated GPUs' utilization: a training
// job's follows its iterations and averages near 88%; a job with a fixed
// utilization keeps near it; an idle GPU reads 0; jobs sharing a GPU keep
// it as busy as the busiest.
func TestSimUtilization(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	low := 1.0
	s := NewSim("n", 3, 80*1024)
	s.Attach(1, []int{0}, SimMemory{PersistentMiB: 1024, EphemeralMiB: 1024, Iteration: 2 * time.Second}, t0)
	s.Attach(2, []int{1}, SimMemory{PersistentMiB: 1024, UtilPct: &low}, t0)
	s.Attach(3, []int{1}, SimMemory{PersistentMiB: 1024, EphemeralMiB: 1024, Iteration: 3 * time.Second}, t0)
	var sum [3]float64
	var lowMax float64
	const n = 600
	for i := range n {
		now := t0.Add(time.Duration(i)*time.Second + 300*time.Millisecond)
		for _, smp := range s.Sample(now) {
			sum[smp.Index] += smp.UtilPct
			if smp.UtilPct < 0 || smp.UtilPct > 100 {
				t.Fatalf("GPU %d at %v: utilization %v", smp.Index, now, smp.UtilPct)
			}
		}
		if u := (SimMemory{UtilPct: &low}).UtilAt(2, now.Sub(t0)); u > lowMax {
			lowMax = u
		}
	}
	if avg := sum[0] / n; avg < 80 || avg > 95 {
		t.Errorf("a training job's GPU averages %.1f%%, want about 88%%", avg)
	}
	if avg := sum[1] / n; avg < 80 || avg > 97 {
		t.Errorf("a GPU shared by a training job and an idle one averages %.1f%%, want the training job's, about 88%%", avg)
	}
	if sum[2] != 0 {
		t.Errorf("an idle GPU averages %.1f%%", sum[2]/n)
	}
	if lowMax >= 5 {
		t.Errorf("a job at 1%% reads up to %.1f%%, want under 5%%", lowMax)
	}
}
