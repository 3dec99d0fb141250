package enginestore

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/models"
)

// The engine reads the unfinished jobs every pass. At a long queue a
// whole read is most of a pass, and between two passes few jobs change:
// the view keeps the jobs of the last read, and a pass reads only the
// rows changed since (models.Store.JobsChangedSince, by jobs.updated_at,
// indexed), with a whole read every fullReadEvery all the same.
//
// Every change of a job row sets its updated_at, whichever replica makes
// it (submits, cancels and holds come through the store from any of
// them); the wait reasons the engine writes leave it, since the engine
// does not read them. A change is read again for changeOverlap after it:
// enough for a transaction that commits after the read that followed its
// write, and for the replicas' clocks to differ by that much. The whole
// read every fullReadEvery bounds what anything else could cost. It is
// rare because it is a slow pass at a long queue (about a second at
// 10,000 queued on the development VM), which the job ends that arrive
// meanwhile wait for.

const (
	fullReadEvery = 5 * time.Minute
	changeOverlap = 5 * time.Second
)

// jobView is the unfinished jobs the engine acts on, as last read.
type jobView struct {
	mu     sync.Mutex
	jobs   map[int64]engine.Job // without Account and dependencies' states
	readAt time.Time            // when the last read began; zero: none yet
	fullAt time.Time            // when the last whole read began
}

// unfinished returns the jobs the engine acts on (models.Store.JobsToSchedule),
// by ID, as engine jobs without their owners' accounts and their
// dependencies' states, which UnfinishedEngineJobs adds.
func (s Store) unfinished(ctx context.Context) ([]engine.Job, error) {
	v := s.view
	if v == nil {
		return s.readAll(ctx)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	began := time.Now()
	if v.readAt.IsZero() || began.Sub(v.fullAt) >= fullReadEvery || began.Before(v.readAt) {
		out, err := s.readAll(ctx)
		if err != nil {
			return nil, err
		}
		v.jobs = make(map[int64]engine.Job, len(out))
		for _, j := range out {
			v.jobs[j.ID] = j
		}
		v.readAt, v.fullAt = began, began
		return cloneJobs(out), nil
	}
	changed, err := s.JobsChangedSince(ctx, v.readAt.Add(-changeOverlap))
	if err != nil {
		return nil, err
	}
	for _, j := range changed {
		if schedulable(&j) {
			v.jobs[j.ID] = s.engineJob(j)
		} else {
			delete(v.jobs, j.ID)
		}
	}
	v.readAt = began
	out := make([]engine.Job, 0, len(v.jobs))
	for _, j := range v.jobs {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b engine.Job) int { return cmp.Compare(a.ID, b.ID) })
	return cloneJobs(out), nil
}

// readAll reads every job the engine acts on.
func (s Store) readAll(ctx context.Context) ([]engine.Job, error) {
	js, err := s.JobsToSchedule(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Job, len(js))
	for i, j := range js {
		out[i] = s.engineJob(j)
	}
	return out, nil
}

// schedulable says whether the engine acts on j, as JobsToSchedule
// chooses: unfinished, and not held unless a replica asked for its cancel.
func schedulable(j *models.Job) bool {
	return slices.Contains(models.UnfinishedStates, j.State) && (!j.Held() || j.CancelRequest != "")
}

// cloneJobs gives each job its own dependencies, whose states the caller
// fills in, so that the view's stay as read.
func cloneJobs(js []engine.Job) []engine.Job {
	for i := range js {
		js[i].Deps = slices.Clone(js[i].Deps)
	}
	return js
}
