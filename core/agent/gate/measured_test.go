package gate

import (
	"context"
	"testing"

	"github.com/gpuportal/gpuportal/core/memest"
)

func TestMeasuredUnpaddedAfterMinSamples(t *testing.T) {
	// wide declares E 4,000 MiB; its peaks 2,400, 2,600 and 2,800 average
	// 2,600, but E is never less than the largest peak: 2,800, unpadded.
	s := newServer(t, []int64{gpuMiB}, Config{})
	add(t, s, 1, wide, 0)
	ctx := context.Background()
	for k, peak := range []int64{2400, 2600, 2800} {
		if _, ok := s.Measured(1); ok {
			t.Fatalf("measured after %d peaks, want none before %d", k, memest.MinSamples)
		}
		if _, _, err := s.Acquire(ctx, 1, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(1, peak); err != nil {
			t.Fatal(err)
		}
	}
	want := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 2800, Source: memest.Measured}
	if got, ok := s.Measured(1); !ok || got != want {
		t.Fatalf("measured %+v %v, want %+v", got, ok, want)
	}
	s.Remove(1)
	if _, ok := s.Measured(1); ok {
		t.Fatal("measured a job the gate no longer holds")
	}
	if _, ok := s.Measured(9); ok {
		t.Fatal("measured an unknown job")
	}
}
