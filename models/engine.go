package models

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
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
	if err := s.db.WithContext(ctx).Where("updated_at >= ?", since).Order("id").Find(&js).Error; err != nil {
		return nil, fmt.Errorf("jobs changed since %s: %w", since.Format(time.RFC3339Nano), err)
	}
	return js, nil
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
