package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/gpuportal/gpuportal/core/job"
)

// Run is one start of a job, numbered from 1 per job (Job.Run is the
// current or last one). It is stored in the same transaction that marks
// the job running, before any machine is asked to start it, and closed in
// the one that records how it ended. Every message between the server and
// the agents about a job names the run (job.RunRef): a message about a run
// that is not the job's current one never changes the job.
type Run struct {
	ID        int64     `gorm:"primaryKey"`
	JobID     int64     `gorm:"uniqueIndex:idx_runs_job_run,priority:1;not null"`
	Run       int64     `gorm:"uniqueIndex:idx_runs_job_run,priority:2;not null"`
	Placement string    `gorm:"type:text"` // "node:index" per GPU, comma-separated
	StartedAt time.Time `gorm:"not null"`
	EndedAt   *time.Time
	// State is the state the job moved to when the run ended: queued or
	// preempted (it waits again), or a final state; empty while it runs.
	State    JobState `gorm:"size:16"`
	ExitCode *int
	Reason   string `gorm:"size:512"`
	// ReclaimedAt is when the portal stopped the run because its GPUs
	// sat idle (idle reclaim), nil if it did not; ReclaimedGPUSeconds is
	// what that gave back: the run's GPUs x the time they had been idle,
	// the figure gpuportal_reclaimed_idle_gpu_seconds_total counts.
	ReclaimedAt         *time.Time
	ReclaimedGPUSeconds float64 `gorm:"not null;default:0"`
}

// Runs returns a job's runs, oldest first.
func (s *Store) Runs(ctx context.Context, jobID int64) ([]Run, error) {
	var rs []Run
	if err := s.db.WithContext(ctx).Where("job_id = ?", jobID).Order("run").Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("runs of job %d: %w", jobID, err)
	}
	return rs, nil
}

// Ref names the run.
func (r *Run) Ref() job.RunRef { return job.RunRef{Job: r.JobID, Run: r.Run} }

// openRun records the start of j's run j.Run.
func openRun(tx *gorm.DB, j *Job, at time.Time) error {
	r := Run{JobID: j.ID, Run: j.Run, Placement: strings.Join(j.Placement, ","), StartedAt: at}
	if err := tx.Create(&r).Error; err != nil {
		return fmt.Errorf("record run %d of job %d: %w", j.Run, j.ID, err)
	}
	return nil
}

// closeRun records how j's current run ended: j holds the state, reason
// and exit code it ended with.
func closeRun(tx *gorm.DB, j *Job, at time.Time) error {
	err := tx.Model(&Run{}).Where("job_id = ? AND run = ? AND ended_at IS NULL", j.ID, j.Run).
		Updates(map[string]any{"ended_at": at, "state": j.State, "exit_code": j.ExitCode, "reason": j.Reason}).Error
	if err != nil {
		return fmt.Errorf("close run %d of job %d: %w", j.Run, j.ID, err)
	}
	return nil
}

// currentRun reads the columns cols of the record of j's current run.
func currentRun(tx *gorm.DB, j *Job, cols ...string) (Run, error) {
	var r Run
	if err := tx.Select(cols).Where("job_id = ? AND run = ?", j.ID, j.Run).Take(&r).Error; err != nil {
		return Run{}, fmt.Errorf("read the record of run %d: %w", j.Run, err)
	}
	return r, nil
}

// reopenRun records that j's current run, closed when the job was put back
// in the queue, runs again (MarkResumed).
func reopenRun(tx *gorm.DB, j *Job) error {
	err := tx.Model(&Run{}).Where("job_id = ? AND run = ?", j.ID, j.Run).
		Updates(map[string]any{"ended_at": nil, "state": "", "exit_code": nil, "reason": ""}).Error
	if err != nil {
		return fmt.Errorf("reopen run %d of job %d: %w", j.Run, j.ID, err)
	}
	return nil
}

// checkRun reports ErrConflict unless run is j's current run and j runs it.
func checkRun(j *Job, run int64) error {
	if j.State != JobRunning {
		return fmt.Errorf("run %d of job %d: the job is %s: %w", run, j.ID, j.State, ErrConflict)
	}
	if j.Run != run {
		return fmt.Errorf("run %d of job %d: the job's current run is %d: %w", run, j.ID, j.Run, ErrStaleRun)
	}
	return nil
}
