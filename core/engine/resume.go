package engine

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// ResumeRecorder is a Store that keeps which checkpoint each run of a job
// resumed from and what the faults before it cost (models.Store).
type ResumeRecorder interface {
	// RecordResume records what run r.Run of job id found in its
	// checkpoint folder as it started; recording a run again, or an
	// earlier one, changes nothing.
	RecordResume(ctx context.Context, id int64, r job.Resume, now time.Time) error
}

// recordResumes passes on to the store, once per run, what each running
// run's machine says it resumed from (job.Usage.Resume). A first run that
// found nothing has nothing to say.
func (e *Engine) recordResumes(ctx context.Context, now time.Time) {
	rr, ok := e.cfg.Store.(ResumeRecorder)
	if !ok {
		return
	}
	for _, n := range e.Nodes() {
		ur, ok := n.(UsageReporter)
		if !ok {
			continue
		}
		for _, u := range ur.JobUsage(now) {
			r := e.runs[u.JobID]
			if u.Resume == nil || r == nil || r.resumeSeen || u.Resume.Run != r.id {
				continue
			}
			if u.Resume.Run == 1 && !u.Resume.Resumed() {
				r.resumeSeen = true
				continue
			}
			if err := rr.RecordResume(ctx, u.JobID, *u.Resume, now); err != nil {
				e.cfg.Logger.Warn("record the checkpoint a run resumed from", "job", u.JobID, "run", u.Resume.Run, "err", err)
				continue
			}
			r.resumeSeen = true
		}
	}
}
