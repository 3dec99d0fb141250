package models

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
)

// MemoryEstimate is the job's unpadded memory estimate on its GPU for
// Salus sharing; the zero Estimate when unknown.
func (j *Job) MemoryEstimate() memest.Estimate {
	return memest.Estimate{PersistentMiB: j.MemPersistentMiB, EphemeralMiB: j.MemEphemeralMiB, Source: memest.Source(j.MemSource)}
}

// MarkRequeued puts a running job that outgrew its Salus lane back in the
// queue with a larger memory estimate. Unlike MarkRetry it counts no
// failure: the job did nothing wrong, its estimate was too small.
func (s *Store) MarkRequeued(ctx context.Context, ref job.RunRef, est memest.Estimate, reason string, now time.Time) error {
	return s.transition(ctx, ref.Job, now, func(j *Job) error {
		if err := j.stopRun(ref.Run, now); err != nil {
			return err
		}
		j.State, j.Reason, j.ExitCode, j.Placement = JobQueued, reason, nil, nil
		j.MemPersistentMiB, j.MemEphemeralMiB, j.MemSource = est.PersistentMiB, est.EphemeralMiB, string(est.Source)
		return nil
	})
}
