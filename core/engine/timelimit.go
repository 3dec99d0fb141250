package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// Time limits (job.ParseTimeLimit): a job's limit bounds its executed
// time over all its runs. The engine checks it every pass: a run that
// reaches it is asked to stop (SIGTERM, the grace period, SIGKILL, by its
// machine), and its job ends TimedOut once it has exited. The stop is
// decided once per run (run.stop), and a job that ends TimedOut never
// runs again, so a limit is enforced once however often the job was
// preempted or requeued. A waiting job whose time is used up (it was
// requeued just at its limit) ends TimedOut without starting (gates.go).

// endedHow says how a part of a run asked to stop ended, for its job's
// reason: "exited with code 143 on node-1" (it stopped on SIGTERM) or
// "killed by signal 9 (killed) on node-1" (the grace period ran out).
func endedHow(ex job.Exit) string {
	if ex.ExitCode < 0 && ex.Err != "" {
		return ex.Err + " on " + ex.Node
	}
	return fmt.Sprintf("exited with code %d on %s", ex.ExitCode, ex.Node)
}

// executed is the time j has run as of now, its current run included.
func executed(j Job, now time.Time) time.Duration {
	d := time.Duration(j.ExecutedS * float64(time.Second))
	if j.State == job.Running && j.LastStartAt != nil {
		d += now.Sub(*j.LastStartAt)
	}
	return d
}

// enforceTimeLimits stops the runs of jobs that have reached their time
// limit.
func (e *Engine) enforceTimeLimits(ctx context.Context, jobs []Job, now time.Time) {
	for i := range jobs {
		j := &jobs[i]
		if j.TimeLimit <= 0 || j.State != job.Running {
			continue
		}
		r := e.runs[j.ID]
		if r == nil || len(r.parts) == 0 || len(r.lost) > 0 {
			continue // not here, or its end is being decided
		}
		switch r.stop {
		case "", job.Preempted, job.Queued:
			// Stopping to wait again would run it past its limit.
		default:
			continue // it ends anyway: cancelled, failed, timed out
		}
		ran := executed(*j, now)
		if job.TimeLeft(j.TimeLimit, ran) > 0 {
			continue
		}
		r.stop, r.reason = job.TimedOut, fmt.Sprintf("time limit %s reached: asked to stop with SIGTERM, then SIGKILL if still running after the grace period",
			job.FormatTimeLimit(j.TimeLimit))
		r.limitStop = true
		e.cfg.Logger.Info("job reached its time limit", "job", j.ID, "run", r.id, "limit", j.TimeLimit, "executed", ran.Round(time.Second))
		e.stats.add(func(s *Stats) { s.TimedOut++ })
		e.stopAll(ctx, j.ID, r)
	}
}
