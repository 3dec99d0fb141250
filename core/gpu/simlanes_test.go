package gpu

import (
	"testing"
	"time"
)

func TestGatedJobsHoldEphemeralOnlyInIterations(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := NewSim("n", 1, 16384)
	m := SimMemory{PersistentMiB: 1000, EphemeralMiB: 4000, Iteration: 10 * time.Second}
	s.Attach(1, []int{0}, m, t0)
	s.Attach(2, []int{0}, m, t0)
	s.Gate(1)
	s.Gate(2)
	used := func(at time.Time) int64 { return s.Sample(at)[0].MemUsedMiB }
	if got := used(t0.Add(6 * time.Second)); got != 2000 {
		t.Fatalf("between iterations: %d MiB, want both jobs' P, 2000", got)
	}
	s.BeginIteration(1, t0.Add(10*time.Second))
	// 60% into the iteration the forward pass peaks: all of E.
	if got := used(t0.Add(16 * time.Second)); got != 6000 {
		t.Fatalf("at job 1's peak: %d MiB, want 2000 + 4000", got)
	}
	s.EndIteration(1)
	if got := used(t0.Add(17 * time.Second)); got != 2000 {
		t.Fatalf("after the iteration: %d MiB, want 2000", got)
	}
	// An iteration that overruns its model holds no E past its length.
	s.BeginIteration(2, t0.Add(20*time.Second))
	if got := used(t0.Add(31 * time.Second)); got != 2000 {
		t.Fatalf("past the iteration's length: %d MiB, want 2000", got)
	}
	s.Detach(1)
	s.Detach(2)
	if got := used(t0.Add(40 * time.Second)); got != 0 {
		t.Fatalf("after detach: %d MiB", got)
	}
}
