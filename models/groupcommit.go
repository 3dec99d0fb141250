package models

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Group commit: submissions that arrive while one is being committed wait
// and are then committed together, in one transaction, by one of them.
// Each caller returns only once its own job is committed, so an
// acknowledged submission survives a crash of the server; under load a
// commit (SQLite's write lock, a PostgreSQL round trip) serves many.

// groupCommitWait bounds one batch's commit: the callers' own contexts
// do not end it, since the batch holds other callers' jobs too.
const groupCommitWait = 30 * time.Second

// maxGroupCommit bounds the jobs committed in one transaction.
const maxGroupCommit = 256

// createReq is one CreateJob waiting to be committed.
type createReq struct {
	job  *Job
	err  error
	done chan struct{} // closed once committed (or failed)
	lead chan struct{} // signalled when this caller is to commit the next batch
}

// groupCommit gathers concurrent CreateJob calls.
type groupCommit struct {
	mu      sync.Mutex
	pending []*createReq
	busy    bool // a caller is committing a batch
}

// CreateJob stores a new queued job and fills in its ID. It returns only
// once the job is committed; on SQLite, concurrent calls share a
// transaction.
func (s *Store) CreateJob(ctx context.Context, j *Job) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create job %q: %w", j.Name, err)
	}
	r := &createReq{job: j, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	if !s.grouped {
		s.createJobs(ctx, []*createReq{r})
		return r.err
	}
	g := &s.submits
	g.mu.Lock()
	g.pending = append(g.pending, r)
	if g.busy {
		g.mu.Unlock()
		select {
		case <-r.done:
			return r.err
		case <-r.lead:
		}
	} else {
		g.busy = true
		g.mu.Unlock()
	}
	// This caller commits what waits, itself among it, then hands over.
	g.mu.Lock()
	n := min(len(g.pending), maxGroupCommit)
	batch := g.pending[:n:n]
	g.pending = append([]*createReq(nil), g.pending[n:]...)
	g.mu.Unlock()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupCommitWait)
	s.createJobs(wctx, batch)
	cancel()
	for _, b := range batch {
		if b != r {
			close(b.done)
		}
	}
	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].lead <- struct{}{}
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	return r.err
}

// createJobs commits batch in one transaction; should that fail, each
// job on its own, so that one bad job fails alone.
func (s *Store) createJobs(ctx context.Context, batch []*createReq) {
	for _, b := range batch {
		b.job.State = JobQueued
		b.job.Reason = "submitted"
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		js := make([]*Job, len(batch))
		for i, b := range batch {
			if err := createJob(tx, b.job); err != nil {
				return err
			}
			js[i] = b.job
		}
		return stampNewJobs(tx, js)
	})
	if err == nil {
		s.writes.add("job", len(batch))
		return
	}
	if len(batch) == 1 {
		batch[0].job.ID = 0
		batch[0].err = err
		return
	}
	for _, b := range batch {
		b.job.ID = 0 // the failed transaction's IDs were never committed
		b.err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return createJob(tx, b.job) })
		if b.err == nil {
			s.writes.add("job", 1)
		}
	}
}

// stampNewJobs sets the updated_at of jobs created in tx to now, as tx
// ends: readers of the rows changed since a time (the engine's view,
// enginestore/view.go, re-reads 5 s back) missed the first rows of a
// batch that took longer to write (26 of 70 jobs, on a loaded CI
// machine, until the view's whole read 5 minutes on). A single job's
// own stamp is fresh enough.
func stampNewJobs(tx *gorm.DB, js []*Job) error {
	if len(js) < 2 {
		return nil
	}
	now := time.Now()
	ids := make([]int64, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	for k := 0; k < len(ids); k += 500 {
		if err := tx.Model(&Job{}).Where("id IN ?", ids[k:min(k+500, len(ids))]).UpdateColumn("updated_at", now).Error; err != nil {
			return fmt.Errorf("stamp the new jobs: %w", err)
		}
	}
	for _, j := range js {
		j.UpdatedAt = now
	}
	return nil
}

func createJob(tx *gorm.DB, j *Job) error {
	if err := tx.Create(j).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return fmt.Errorf("create job %q: idempotency key %q: %w", j.Name, j.IdempotencyKey, ErrExists)
		}
		return fmt.Errorf("create job %q: %w", j.Name, err)
	}
	return addEvent(tx, j, j.SubmittedAt)
}

// CreateJobs stores new queued jobs in one transaction and fills in
// their IDs: an import or a test's queue of thousands.
func (s *Store) CreateJobs(ctx context.Context, js []*Job) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, j := range js {
			j.State, j.Reason = JobQueued, "submitted"
			if err := createJob(tx, j); err != nil {
				return err
			}
		}
		return stampNewJobs(tx, js)
	})
	if err != nil {
		return fmt.Errorf("create %d jobs: %w", len(js), err)
	}
	s.writes.add("job", len(js))
	return nil
}
