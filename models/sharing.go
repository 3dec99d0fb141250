package models

import (
	"context"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
)

// MemoryEstimate is the job's unpadded memory estimate on its GPU for
// Salus sharing; the zero Estimate when unknown.
func (j *Job) MemoryEstimate() memest.Estimate {
	return memest.Estimate{PersistentMiB: j.MemPersistentMiB, EphemeralMiB: j.MemEphemeralMiB, Source: memest.Source(j.MemSource)}
}

// MarkRequeued puts a running job that outgrew its Salus lane back in the
// queue with rq's estimate. Unlike MarkRetry it counts no failure: the
// job did nothing wrong, its estimate was too small. rq.Outcome, given the
// estimate the run started from and the job's stalls so far, decides
// whether it waits (RetryAt) or is held, and its reason; MarkRequeued
// stores that and returns it.
func (s *Store) MarkRequeued(ctx context.Context, ref job.RunRef, rq job.Requeue) (job.RequeueOutcome, error) {
	var out job.RequeueOutcome
	err := s.transition(ctx, ref.Job, rq.At, func(j *Job) error {
		if err := j.stopRun(ref.Run, rq.At); err != nil {
			return err
		}
		out = rq.Outcome(j.MemoryEstimate(), j.RequeueStalls)
		est := rq.Estimate
		j.State, j.Reason, j.ExitCode, j.Placement = JobQueued, out.Reason, nil, nil
		j.RetryAt, j.RequeueStalls = out.RetryAt, out.Stalls
		j.MemPersistentMiB, j.MemEphemeralMiB, j.MemSource = est.PersistentMiB, est.EphemeralMiB, string(est.Source)
		return nil
	})
	return out, err
}

// Held tells whether the job waits but is never scheduled: a sharing job
// requeued job.MaxRequeueStalls times in a row for outgrowing its lane
// without progress, or a job whose owner's account is disabled
// (HoldReason). Its Reason says why and what to do.
func (j *Job) Held() bool { return held(j.State, j.RequeueStalls, j.HoldReason) }

// held is Job.Held of a job in state with requeue stalls and a hold
// reason.
func held(state JobState, stalls int, reason string) bool {
	return (state == JobQueued || state == JobPreempted) && (stalls >= job.MaxRequeueStalls || reason != "")
}
