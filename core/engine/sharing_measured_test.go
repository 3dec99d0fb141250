package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/sched"
)

func (s *memStore) SetMeasuredMemory(_ context.Context, id int64, est memest.Estimate) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return ErrNotFound
	}
	j.Memory = est
	return nil
}

func TestPreemptedSharingJobResumesFromMeasured(t *testing.T) {
	// The gate measured the job's E at 2,600 MiB where it declared 4,000:
	// preempted and resumed, it starts from the measured estimate, and
	// the scheduler is given that estimate padded.
	declared := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000, Source: memest.Declared}
	measured := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 2600, Source: memest.Measured}
	tests := []struct {
		name     string
		measured *memest.Estimate
		want     memest.Estimate
	}{
		{"measured", &measured, measured},
		{"source filled in", &memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 2600}, measured},
		{"too few peaks: the stored estimate", nil, declared},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := newMemStore(Job{ID: 1, GPUs: 1, Sharing: true, Memory: declared, Command: []string{"train"}, SubmittedAt: t0})
			n := newFakeNode("n1", 1)
			e, clock := newTestEngine(t, store, n)
			mustPass(t, e)
			e.preempt(ctx, sched.Preempt{JobID: 1, Reason: "for a job in a higher queue"}, nil)
			clock.t = t0.Add(time.Minute)
			ex := exit("n1", 1, -1, clock.t)
			ex.Measured = tc.measured
			delete(n.running, 1)
			e.testExit(ctx, ex)
			if got := store.jobs[1]; got.State != job.Preempted || got.Memory != tc.want {
				t.Fatalf("state %s, estimate %+v: want preempted with %+v", got.State, got.Memory, tc.want)
			}
			snap, _ := e.snapshot([]Job{*store.jobs[1]}, clock.t)
			pad := memest.Padding{}.Apply(tc.want)
			if sj := snap.Jobs[0]; sj.MemPersistentMiB != pad.PersistentMiB || sj.MemEphemeralMiB != pad.EphemeralMiB {
				t.Fatalf("scheduler's estimate P %d E %d, want %+v padded", sj.MemPersistentMiB, sj.MemEphemeralMiB, pad)
			}
			mustPass(t, e)
			if len(n.starts) != 2 || n.starts[1].Sharing == nil || n.starts[1].Sharing.Memory != tc.want {
				t.Fatalf("resumed with %+v, want %+v", n.starts[len(n.starts)-1].Sharing, tc.want)
			}
		})
	}
}
