package gate

import (
	"context"
	"testing"
)

// TestIterationsCountsFinishedIterations: the gate counts a job's
// iterations as they end, not as they start, and knows nothing of jobs it
// does not hold.
func TestIterationsCountsFinishedIterations(t *testing.T) {
	s := newServer(t, []int64{gpuMiB}, Config{})
	add(t, s, 1, wide, 0)
	if n, ok := s.Iterations(1); ok || n != 0 {
		t.Fatalf("before any iteration: %d, %v", n, ok)
	}
	ctx := context.Background()
	for i := range 3 {
		if _, _, err := s.Acquire(ctx, 1, 0); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.Iterations(1); n != int64(i) {
			t.Fatalf("during iteration %d: count %d, want %d", i+1, n, i)
		}
		if err := s.Release(1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n, ok := s.Iterations(1); !ok || n != 3 {
		t.Fatalf("after 3 iterations: %d, %v", n, ok)
	}
	if _, ok := s.Iterations(9); ok {
		t.Fatal("a job the gate does not hold has iterations")
	}
	s.Remove(1)
	if _, ok := s.Iterations(1); ok {
		t.Fatal("a removed job still has iterations")
	}
}
