package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// RecordLateExit records the exit ex of a run that its machine
// reported after the server had ended the run without it: the machine was
// lost (killed, frozen, cut off), the engine requeued the job or ended it
// as asked, and the machine came back with the run's exit (engine.
// LateExitRecorder). The run keeps the exit code, and the job's history
// says how and when the run really ended, which the server could not say
// before: a run that had finished (code 0) ran again for nothing but its
// loss. It reports whether it recorded anything: a run whose end is known
// already (its exit code recorded, a duplicate report), still open, or
// not placed on node changes nothing.
func (s *Store) RecordLateExit(ctx context.Context, ex job.Exit, back, now time.Time) (bool, error) {
	ref, node := ex.Ref(), ex.Node
	recorded := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var r Run
		err := tx.Where("job_id = ? AND run = ?", ref.Job, ref.Run).First(&r).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("late exit of %s: %w", ref, err)
		}
		if r.EndedAt == nil || r.ExitCode != nil || !slices.Contains(gpu.PlacementNodes(strings.Split(r.Placement, ",")), node) {
			return nil
		}
		// The job first, as every change of a job and its runs locks them
		// (transitionTx).
		j, err := lockJob(tx, ref.Job)
		if err != nil {
			return fmt.Errorf("late exit of %s: %w", ref, err)
		}
		res := tx.Model(&Run{}).Where("id = ? AND exit_code IS NULL", r.ID).Update("exit_code", ex.ExitCode)
		if res.Error != nil {
			return fmt.Errorf("late exit of %s: %w", ref, res.Error)
		}
		if res.RowsAffected == 0 {
			return nil // recorded meanwhile
		}
		if err := moveRunEnd(tx, j, r, ex.At, now); err != nil {
			return fmt.Errorf("late exit of %s: %w", ref, err)
		}
		if err := addNote(tx, ref.Job, ref.Run, LateExitNote(ex, back), now); err != nil {
			return fmt.Errorf("late exit of %s: %w", ref, err)
		}
		recorded = true
		return nil
	})
	return recorded, err
}

// moveRunEnd makes at, when its machine says run r of job j (locked)
// ended, the run's recorded end in place of the server's (when it took
// the machine for lost), and moves the job's executed time and service
// by as much: the job's page, the API and accounting count the time the
// run held its GPUs. An end before the run's start or after now (another
// clock's) changes nothing.
func moveRunEnd(tx *gorm.DB, j *Job, r Run, at, now time.Time) error {
	if r.EndedAt == nil || at.Before(r.StartedAt) || at.After(now) || at.Equal(*r.EndedAt) {
		return nil
	}
	if err := tx.Model(&Run{}).Where("id = ?", r.ID).Update("ended_at", at).Error; err != nil {
		return fmt.Errorf("move the end of run %d: %w", r.Run, err)
	}
	j.uncount(r.EndedAt.Sub(at).Seconds())
	err := tx.Model(&Job{}).Where("id = ?", j.ID).
		Updates(map[string]any{"executed_s": j.ExecutedS, "attained_service": j.AttainedService}).Error
	if err != nil {
		return fmt.Errorf("count run %d of job %d to its end: %w", r.Run, j.ID, err)
	}
	return nil
}

// LateExitNote is the history's line for exit ex, which reached the
// server when its machine came back (back), after it had ended the run
// without it: the run had ended while the machine was cut off, or,
// ending after back, was still running then and was stopped.
func LateExitNote(ex job.Exit, back time.Time) string {
	how := fmt.Sprintf("exit code %d", ex.ExitCode)
	if ex.ExitCode == 0 {
		how = "success (exit code 0)"
	}
	if ex.Err != "" {
		how += " (" + ex.Err + ")"
	}
	if !back.IsZero() && ex.At.After(back) {
		return fmt.Sprintf("run %d was still running on %s when the machine came back at %s UTC, after the server had ended it as lost: stopped, it ended at %s UTC with %s",
			ex.Run, ex.Node, back.UTC().Format("15:04:05"), ex.At.UTC().Format("15:04:05"), how)
	}
	return fmt.Sprintf("run %d had ended on %s at %s UTC with %s while the machine was cut off from the server, which learned of it only when the machine came back, after it had ended the run as lost",
		ex.Run, ex.Node, ex.At.UTC().Format("15:04:05"), how)
}
