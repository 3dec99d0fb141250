package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// JobEvent is one step of a job's history: each state it entered, when,
// and why or where.
type JobEvent struct {
	ID     int64     `gorm:"primaryKey"`
	JobID  int64     `gorm:"index;not null"`
	At     time.Time `gorm:"not null"`
	State  JobState  `gorm:"size:16;not null"`
	Detail string    `gorm:"size:512"`
	// Run is the job's run the event belongs to: its current or last run
	// when the event was recorded, 0 before the first.
	Run int64 `gorm:"not null;default:0"`
}

// addEvent records j's current state in its history.
func addEvent(tx *gorm.DB, j *Job, at time.Time) error {
	detail := j.Reason
	if j.State == JobRunning {
		detail = "on " + strings.Join(j.Placement, ", ")
		if j.Reason != "" {
			// A start clears the reason: a running job has one when a
			// run was taken back (MarkResumed), which the entry says, so
			// that it does not read as a new run.
			detail += "; " + j.Reason
		}
	}
	e := JobEvent{JobID: j.ID, At: at, State: j.State, Detail: detail, Run: j.Run}
	if err := tx.Create(&e).Error; err != nil {
		return fmt.Errorf("record history of job %d: %w", j.ID, err)
	}
	// The owner's notifications of the event commit with it, or not at
	// all (notifications.go).
	return enqueueNotifications(tx, j, &e)
}

// JobEvents returns a job's history, oldest first.
func (s *Store) JobEvents(ctx context.Context, jobID int64) ([]JobEvent, error) {
	var es []JobEvent
	if err := s.db.WithContext(ctx).Where("job_id = ?", jobID).Order("id").Find(&es).Error; err != nil {
		return nil, fmt.Errorf("history of job %d: %w", jobID, err)
	}
	return es, nil
}
