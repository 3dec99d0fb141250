package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/gpuportal/gpuportal/core/job"
)

// RecordResume records what run r.Run of job id found in its checkpoint
// folder as it started (engine.ResumeRecorder): the run it resumes from
// and when that checkpoint was written, or that it starts from scratch,
// and the work the stop before it cost, in seconds: the time the runs
// from the last recorded one on ran after the checkpoint (LostWork), or,
// from scratch, all the time of the runs before that was not lost
// already. A line in the job's history says so. Recording a run again,
// or an earlier one than the last recorded, changes nothing.
func (s *Store) RecordResume(ctx context.Context, id int64, r job.Resume, now time.Time) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var j Job
		if err := tx.Select("id", "state", "run", "resume_run", "lost_s").First(&j, id).Error; err != nil {
			return fmt.Errorf("resume of job %d: %w", id, err)
		}
		if r.Run <= j.ResumeRun || r.Run > j.Run {
			return nil
		}
		// From a checkpoint, the runs from the last recorded one on (it
		// was running when recorded) lose their time after it; from
		// scratch, every run before loses what it had not lost already.
		since := j.ResumeRun
		if !r.Resumed() {
			since = 0
		}
		var before []Run
		if err := tx.Where("job_id = ? AND run >= ? AND run < ? AND ended_at IS NOT NULL", id, since, r.Run).
			Order("run").Find(&before).Error; err != nil {
			return fmt.Errorf("resume of job %d: earlier runs: %w", id, err)
		}
		lost := LostWork(before, r)
		if !r.Resumed() {
			lost = max(lost-time.Duration(j.LostS*float64(time.Second)), 0)
		}
		var at *time.Time
		if r.Resumed() {
			t := r.CheckpointAt.UTC()
			at = &t
		}
		err := tx.Model(&Job{}).Where("id = ?", id).Updates(map[string]any{
			"resume_run": r.Run, "resume_from_run": r.FromRun, "resume_checkpoint_at": at, "resume_from_node": r.FromNode,
			"resume_lost_s": lost.Seconds(), "lost_s": j.LostS + lost.Seconds()}).Error
		if err != nil {
			return fmt.Errorf("resume of job %d: %w", id, err)
		}
		e := JobEvent{JobID: id, At: now, State: j.State, Detail: ResumeNote(r, lost), Run: r.Run}
		if err := tx.Create(&e).Error; err != nil {
			return fmt.Errorf("resume of job %d: history: %w", id, err)
		}
		return nil
	})
}

// LostWork is the work that run r redoes of the ended runs before it: of
// each, the time it ran after the checkpoint r resumes from (all of it
// when r starts from scratch, none when the checkpoint is newer than its
// end). A run ends when the server records its end, or, after a lost
// machine, when the server lost it (engine.requeueLost), which may be
// off the run's own end by up to the heartbeat timeout: the figure is
// what the job itself redoes give or take that.
func LostWork(before []Run, r job.Resume) time.Duration {
	var lost time.Duration
	for _, p := range before {
		if p.EndedAt == nil {
			continue
		}
		from := p.StartedAt
		if r.Resumed() && r.CheckpointAt.After(from) {
			from = r.CheckpointAt
		}
		if d := p.EndedAt.Sub(from); d > 0 {
			lost += d
		}
	}
	return lost
}

// ResumeNote is the line of a job's history that says what run r resumed
// from and what the faults before it cost.
func ResumeNote(r job.Resume, lost time.Duration) string {
	cost := fmt.Sprintf("the work lost to the stop before it: %s", lost.Round(100*time.Millisecond))
	switch {
	case !r.Resumed():
		return fmt.Sprintf("run %d started from scratch: no checkpoint in its folder on its machine; %s", r.Run, cost)
	case r.FromRun > 0 && r.FromNode != "":
		return fmt.Sprintf("run %d resumed from the checkpoint run %d wrote at %s UTC on %s (the server's copy); %s", r.Run, r.FromRun,
			r.CheckpointAt.UTC().Format("15:04:05"), r.FromNode, cost)
	case r.FromNode != "":
		return fmt.Sprintf("run %d resumed from the checkpoint written at %s UTC on %s (the server's copy); %s", r.Run,
			r.CheckpointAt.UTC().Format("15:04:05"), r.FromNode, cost)
	case r.FromRun > 0:
		return fmt.Sprintf("run %d resumed from the checkpoint run %d wrote at %s UTC; %s", r.Run, r.FromRun,
			r.CheckpointAt.UTC().Format("15:04:05"), cost)
	default:
		return fmt.Sprintf("run %d resumed from the checkpoint written at %s UTC; %s", r.Run,
			r.CheckpointAt.UTC().Format("15:04:05"), cost)
	}
}
