package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/gpuportal/gpuportal/core/job"
)

// SetKeepAlive records that running job id is kept alive, though idle,
// until until. ErrConflict: the job is not running (any more).
func (s *Store) SetKeepAlive(ctx context.Context, id int64, until time.Time) error {
	res := s.db.WithContext(ctx).Model(&Job{}).Where("id = ? AND state = ?", id, job.Running).Update("keep_alive_until", until)
	if res.Error != nil {
		return fmt.Errorf("keep job %d alive: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("keep job %d alive: %w", id, ErrConflict)
	}
	return nil
}

// RecordReclaim records that the portal reclaims the idle GPUs of run
// ref at at, giving back gpuSeconds (the run's GPUs x the time they had
// been idle, what /metrics counts): accounting's reclaimed GPU-hours are
// the sum of these. The job goes to the back of its queue
// (Job.ReenteredAt), so that should it wait again, the jobs waiting now
// get the GPUs first. ErrConflict: ref is not a running run.
func (s *Store) RecordReclaim(ctx context.Context, ref job.RunRef, gpuSeconds float64, at time.Time) error {
	if !(gpuSeconds >= 0) {
		return fmt.Errorf("record reclaim of run %d of job %d: %v GPU-seconds: want 0 or more", ref.Run, ref.Job, gpuSeconds)
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&Run{}).Where("job_id = ? AND run = ? AND ended_at IS NULL", ref.Job, ref.Run).
			Updates(map[string]any{"reclaimed_at": at, "reclaimed_gpu_seconds": gpuSeconds})
		if res.Error != nil {
			return fmt.Errorf("record reclaim of run %d of job %d: %w", ref.Run, ref.Job, res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("record reclaim of run %d of job %d: %w", ref.Run, ref.Job, ErrConflict)
		}
		if err := tx.Model(&Job{}).Where("id = ?", ref.Job).Update("reentered_at", at).Error; err != nil {
			return fmt.Errorf("record reclaim of job %d: %w", ref.Job, err)
		}
		return nil
	})
}
