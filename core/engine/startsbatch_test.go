package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// batchStore records a pass's starts at once, as the real store does;
// refuse is a job whose start it refuses.
type batchStore struct {
	*memStore
	calls  int
	refuse int64
}

func (s *batchStore) MarkStartedAll(ctx context.Context, starts []StartRecord, now time.Time) ([]int64, []error, error) {
	s.calls++
	runs, errs := make([]int64, len(starts)), make([]error, len(starts))
	for i, st := range starts {
		if st.JobID == s.refuse {
			errs[i] = fmt.Errorf("start job %d: %w", st.JobID, errConflict)
			continue
		}
		runs[i], errs[i] = s.memStore.MarkStarted(ctx, st.JobID, st.Placement, now)
	}
	return runs, errs, nil
}

// TestPassRecordsItsStartsAtOnce: the starts of one pass are recorded in
// one store call before their machines start them; a start the store
// refuses is not started, and the others are.
func TestPassRecordsItsStartsAtOnce(t *testing.T) {
	var jobs []Job
	for id := int64(1); id <= 4; id++ {
		jobs = append(jobs, Job{ID: id, GPUs: 1, SimDuration: 100, SubmittedAt: t0})
	}
	mem := newMemStore(jobs...)
	n := newFakeNode("n0", 4)
	e, _ := newTestEngine(t, mem, n)
	store := &batchStore{memStore: mem, refuse: 3}
	e.cfg.Store = store
	mustPass(t, e)
	if store.calls != 1 {
		t.Errorf("%d calls to record the starts, want 1", store.calls)
	}
	started := map[int64]int64{}
	for _, s := range n.starts {
		started[s.JobID] = s.Run
	}
	for _, id := range []int64{1, 2, 4} {
		if mem.state(id) != job.Running || started[id] != 1 {
			t.Errorf("job %d: %s, started as run %d; want running as run 1", id, mem.state(id), started[id])
		}
	}
	if _, ok := started[3]; ok || mem.state(3) != job.Queued {
		t.Errorf("the refused job is %s and started %v; want it waiting, not started", mem.state(3), ok)
	}
}
