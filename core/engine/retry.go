package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
)

// retry decides whether a run that failed on its own starts again, and
// records it if so. A run is retried up to MaxRetries times, with a
// backoff that doubles each time, unless it failed like the run before:
// with the same exit code, soon after its start. That is a fault in the
// job (a typo, a missing file), and retrying only wastes GPUs.
func (e *Engine) retry(ctx context.Context, ex agent.Exit, r *run) bool {
	code := ex.ExitCode
	if r.code != nil {
		code = *r.code
	}
	if r.failures >= e.cfg.MaxRetries {
		if e.cfg.MaxRetries > 0 {
			r.reason += fmt.Sprintf("; gave up after %d retries", r.failures)
		}
		return false
	}
	ran := ex.At.Sub(r.started)
	if r.lastCode != nil && *r.lastCode == code && ran < e.cfg.QuickFailure {
		r.reason += fmt.Sprintf("; failed again the same way %s after its start: not retried", ran.Round(time.Second))
		return false
	}
	wait := e.cfg.RetryBackoff << r.failures
	at := ex.At.Add(wait)
	reason := fmt.Sprintf("%s; retry %d of %d at %s", r.reason, r.failures+1, e.cfg.MaxRetries, at.Format(time.TimeOnly))
	if err := e.cfg.Store.MarkRetry(ctx, ex.JobID, code, reason, at, ex.At); err != nil {
		e.cfg.Logger.Error("record job retry", "job", ex.JobID, "err", err)
		return true
	}
	e.cfg.Logger.Info("job will be retried", "job", ex.JobID, "exit_code", code, "at", at)
	e.stats.add(func(s *Stats) { s.Retries++ })
	return true
}
