package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/gpuportal/gpuportal/core/job"
)

// JobsToSchedule returns the unfinished jobs the engine acts on. Held
// jobs (Job.Held) are left out, so that the engine never schedules them,
// unless a replica asked for their cancel, which the engine carries out.
func (s *Store) JobsToSchedule(ctx context.Context) ([]Job, error) {
	js, err := s.UnfinishedJobs(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(js, func(j Job) bool { return j.Held() && j.CancelRequest == "" }), nil
}

// JobsChangedSince returns the jobs whose row changed at or after since
// (jobs.updated_at, which every change of a job sets, by the clock of the
// server that made it), in any state, by ID: what the engine reads
// between whole reads of the unfinished jobs (enginestore). A job's wait
// reason is not a change (SetReasons).
func (s *Store) JobsChangedSince(ctx context.Context, since time.Time) ([]Job, error) {
	var js []Job
	if err := s.db.WithContext(ctx).Where("updated_at >= ?", since).Find(&js).Error; err != nil {
		return nil, fmt.Errorf("jobs changed since %s: %w", since.Format(time.RFC3339Nano), err)
	}
	// Ordered here, not by the query: SQLite would read the whole table
	// in the order of IDs rather than search the index on updated_at.
	slices.SortFunc(js, func(a, b Job) int { return cmp.Compare(a.ID, b.ID) })
	return js, nil
}

// JobStamp is when a job's row last changed (jobs.updated_at).
type JobStamp struct {
	ID        int64
	UpdatedAt time.Time
}

// JobStampsSince returns the stamps of the jobs whose row changed at or
// after since, by ID: what JobsChangedSince would read, without the rows,
// so that a reader that has a row as it last changed need not read it
// again (enginestore's view).
func (s *Store) JobStampsSince(ctx context.Context, since time.Time) ([]JobStamp, error) {
	// Scanned by hand: the engine reads a thousand stamps or more every
	// pass, and gorm's scan by reflection cost more than the query.
	rows, err := s.db.WithContext(ctx).Model(&Job{}).Select("id", "updated_at").
		Where("updated_at >= ?", since).Rows()
	if err != nil {
		return nil, fmt.Errorf("jobs' stamps since %s: %w", since.Format(time.RFC3339Nano), err)
	}
	defer rows.Close()
	var out []JobStamp
	for rows.Next() {
		var st JobStamp
		if err := rows.Scan(&st.ID, &st.UpdatedAt); err != nil {
			return nil, fmt.Errorf("jobs' stamps since %s: %w", since.Format(time.RFC3339Nano), err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobs' stamps since %s: %w", since.Format(time.RFC3339Nano), err)
	}
	// Ordered here, not by the query (JobsChangedSince).
	slices.SortFunc(out, func(a, b JobStamp) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// SetQueueStates records the queue state the scheduler handed back for
// each job, so that the next pass (and the next server) sees it.
func (s *Store) SetQueueStates(ctx context.Context, states map[int64]QueueState) error {
	if len(states) == 0 {
		return nil
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for id, q := range states {
			err := tx.Model(&Job{}).Where("id = ?", id).Updates(map[string]any{
				"queue_index": q.Index, "queue_since": q.Since, "cycle_start": q.CycleStart,
				"cycle_service": q.CycleService, "cycle_executed": q.CycleExecuted, "promotions": q.Promotions,
			}).Error
			if err != nil {
				return fmt.Errorf("set queue state of job %d: %w", id, err)
			}
		}
		return nil
	})
}

// Held is that run Ref of a job holds GPUs GPUs from At on, a shared GPU
// counted by the job's share of it (usage.Shares): it changes as jobs
// join and leave the GPUs the run shares.
type Held struct {
	Ref  job.RunRef
	GPUs float64
	At   time.Time
}

// SetHeld records each change of the GPUs a running job holds: the run
// in progress attains service at its old figure up to the change's At,
// and at the new one from then on (usage.Accrual.Reheld). A change for a
// run that is not the job's current one, or a job that no longer runs,
// changes nothing: its run has ended, and the store counted it then.
func (s *Store) SetHeld(ctx context.Context, changes []Held) error {
	if len(changes) == 0 {
		return nil
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, c := range changes {
			j, err := lockJob(tx, c.Ref.Job)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if j.State != JobRunning || j.Run != c.Ref.Run || j.LastStartAt == nil {
				continue
			}
			j.setAccrual(j.Accrual().Reheld(c.At.Sub(*j.LastStartAt).Seconds(), c.GPUs))
			err = tx.Model(&Job{}).Where("id = ?", j.ID).Updates(map[string]any{
				"run_accrual_s": j.RunAccrualS, "run_gpu_seconds": j.RunGPUSeconds, "held_gpus": j.HeldGPUs,
			}).Error
			if err != nil {
				return fmt.Errorf("set GPUs held by job %d: %w", j.ID, err)
			}
		}
		return nil
	})
}

// CompletedGPUTimes returns the attained service (GPU-seconds) of up to
// limit recently succeeded jobs: what tiresias-g learns its distribution from.
func (s *Store) CompletedGPUTimes(ctx context.Context, limit int) ([]float64, error) {
	var out []float64
	err := s.db.WithContext(ctx).Model(&Job{}).Where("state = ? AND attained_service > 0", JobSucceeded).
		Order("id DESC").Limit(limit).Pluck("attained_service", &out).Error
	if err != nil {
		return nil, fmt.Errorf("completed GPU times: %w", err)
	}
	return out, nil
}
