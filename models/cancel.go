package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// RequestCancel cancels a job from a replica that does not schedule: a
// waiting job ends at once, as Cancel does; for a running one it records
// the request, which the leader's engine reads on its next pass and
// carries out by stopping the job. A finished job is an ErrConflict.
func (s *Store) RequestCancel(ctx context.Context, id int64, reason string, now time.Time) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		j, err := lockJob(tx, id)
		if err != nil {
			return err
		}
		switch {
		case j.State.Waiting():
			j.State, j.Reason, j.FinishedAt = JobCancelled, reason, &now
			if err := tx.Save(j).Error; err != nil {
				return fmt.Errorf("cancel job %d: %w", id, err)
			}
			return addEvent(tx, j, now)
		case j.State == JobRunning:
			if j.CancelRequest != "" {
				return nil // the first request's reason stands
			}
			err := tx.Model(&Job{}).Where("id = ?", id).Update("cancel_request", reason).Error
			if err != nil {
				return fmt.Errorf("request cancel of job %d: %w", id, err)
			}
			return nil
		default:
			return fmt.Errorf("cancel job %d in state %s: %w", id, j.State, ErrConflict)
		}
	})
}
