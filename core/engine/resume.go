package engine

import (
	"context"
	"maps"
	"slices"
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
// run's machine says it resumed from (job.Usage.Resume, or
// ResumeReporter). A first run that found nothing has nothing to say.
// With usage false it asks ResumeReporters only: the pass asks again
// right after its starts, so that a run whose machine knows at its start
// (the Slurm executor) is recorded though it ends before the next pass,
// without reading the machines' usage twice.
func (e *Engine) recordResumes(ctx context.Context, now time.Time, usage bool) {
	rr, ok := e.cfg.Store.(ResumeRecorder)
	if !ok {
		return
	}
	for _, n := range e.Nodes() {
		found := make(map[int64]job.Resume)
		if ur, ok := n.(UsageReporter); ok && usage {
			for _, u := range ur.JobUsage(now) {
				if u.Resume != nil {
					found[u.JobID] = *u.Resume
				}
			}
		}
		if rp, ok := n.(ResumeReporter); ok {
			maps.Copy(found, rp.Resumes())
		}
		for _, id := range slices.Sorted(maps.Keys(found)) {
			e.recordResume(ctx, rr, id, found[id], now)
		}
	}
}

// recordResume records once what job id's current run resumed from, as
// res says, unless res is of another run.
func (e *Engine) recordResume(ctx context.Context, rr ResumeRecorder, id int64, res job.Resume, now time.Time) {
	r := e.runs[id]
	if r == nil || r.resumeSeen || res.Run != r.id {
		return
	}
	if res.Run == 1 && !res.Resumed() {
		r.resumeSeen = true
		return
	}
	if err := rr.RecordResume(ctx, id, res, now); err != nil {
		e.cfg.Logger.Warn("record the checkpoint a run resumed from", "job", id, "run", res.Run, "err", err)
		return
	}
	r.resumeSeen = true
}

// recordExitResume records what the run of exit ex resumed from, when the
// exit says and its usage has not yet (a run that ended within a pass of
// its start), just before the run's outcome (tryRecord).
func (e *Engine) recordExitResume(ctx context.Context, ex job.Exit) {
	rr, ok := e.cfg.Store.(ResumeRecorder)
	if !ok || ex.Resume == nil {
		return
	}
	e.recordResume(ctx, rr, ex.JobID, *ex.Resume, e.cfg.Now())
}
