package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// retry decides whether a run that failed on its own starts again, and
// if so returns the store write that records it; nil means no retry. A
// job's own failure is final unless it asked for retries (Job.Retries,
// at most MaxRetries): then it is retried up to that many times, with a
// backoff that doubles each time, unless it failed like the run before:
// with the same exit code, soon after its start. That is a fault in the
// job (a typo, a missing file), and retrying only wastes GPUs. When it is
// not retried, r.reason says why. Failures that are not the job's (its
// machine lost, its GPU failed) never come here: they requeue it.
func (e *Engine) retry(ex job.Exit, r *run) func(context.Context) error {
	code := ex.ExitCode
	if r.code != nil {
		code = *r.code
	}
	limit := min(r.retries, e.cfg.MaxRetries)
	if r.failures >= limit {
		if limit > 0 {
			r.reason += fmt.Sprintf("; gave up after %d retries", r.failures)
		}
		return nil
	}
	ran := ex.At.Sub(r.started)
	if r.lastCode != nil && *r.lastCode == code && ran < e.cfg.QuickFailure {
		r.reason += fmt.Sprintf("; failed again the same way %s after its start: not retried", ran.Round(time.Second))
		return nil
	}
	wait := e.cfg.RetryBackoff << r.failures
	at := ex.At.Add(wait)
	reason := fmt.Sprintf("%s; retry %d of %d at %s", r.reason, r.failures+1, limit, at.Format(time.TimeOnly))
	ref := job.RunRef{Job: ex.JobID, Run: r.id}
	return func(ctx context.Context) error {
		if err := e.cfg.Store.MarkRetry(ctx, ref, code, reason, at, ex.At); err != nil {
			return fmt.Errorf("record retry of %s: %w", ref, err)
		}
		e.cfg.Logger.Info("job will be retried", "job", ex.JobID, "exit_code", code, "at", at)
		cause := RetryExitCode
		if ex.Err != "" {
			cause = RetryError
		}
		e.stats.retried(cause)
		e.waitFrom(ex.JobID, at)
		return nil
	}
}
