package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// resumeStore is a memStore that keeps what runs resumed from.
type resumeStore struct {
	*memStore
	got map[int64][]job.Resume
}

func (s *resumeStore) RecordResume(_ context.Context, id int64, r job.Resume, _ time.Time) error {
	s.got[id] = append(s.got[id], r)
	return nil
}

// TestExitSaysWhatItsRunResumedFrom: a run that ends before any pass read
// its machine's usage still has what it resumed from recorded, from its
// exit, once, with its outcome; a first run from scratch has nothing to
// record, and a fenced engine records it with the held exit once it may.
func TestExitSaysWhatItsRunResumedFrom(t *testing.T) {
	ctx := context.Background()
	at := t0.Add(-time.Minute)
	tests := []struct {
		name   string
		run    int64
		resume *job.Resume
		fenced bool
		want   int
	}{
		{"resumed", 2, &job.Resume{Run: 2, FromRun: 1, CheckpointAt: at}, false, 1},
		{"from scratch after a stop", 2, &job.Resume{Run: 2}, false, 1},
		{"a first run", 1, &job.Resume{Run: 1}, false, 0},
		{"another run's", 2, &job.Resume{Run: 1, CheckpointAt: at}, false, 0},
		{"not said", 2, nil, false, 0},
		{"fenced", 2, &job.Resume{Run: 2, FromRun: 1, CheckpointAt: at}, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			started := t0
			mem := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0, State: job.Running, Run: tc.run, LastStartAt: &started})
			store := &resumeStore{memStore: mem, got: make(map[int64][]job.Resume)}
			n := newFakeNode("n0", 1)
			n.running[1] = tc.run
			e, _ := newTestEngine(t, mem, n)
			e.cfg.Store = store
			if tc.fenced {
				e.Fence("the database does not answer")
			}
			delete(n.running, 1)
			e.testExit(ctx, job.Exit{Node: "n0", JobID: 1, Run: tc.run, Resume: tc.resume})
			e.testExit(ctx, job.Exit{Node: "n0", JobID: 1, Run: tc.run, Resume: tc.resume}) // sent again
			if tc.fenced {
				if got := store.got[1]; len(got) != 0 {
					t.Errorf("recorded %+v while fenced; want nothing", got)
				}
				e.Unfence()
				mustPass(t, e)
			}
			if got := store.got[1]; len(got) != tc.want || (tc.want == 1 && got[0] != *tc.resume) {
				t.Errorf("recorded %+v; want %d of %+v", got, tc.want, tc.resume)
			}
		})
	}
}
