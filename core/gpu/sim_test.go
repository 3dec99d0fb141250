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
