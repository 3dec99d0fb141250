package engine

import (
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// Runs asked to stop. A job asked to stop (preempted, cancelled, out of
// time, requeued) runs on while it saves its work, until it exits or its
// machine kills it at the grace period's end; meanwhile the store says it
// runs. So that its page says why and until when, the engine tells which
// runs it has asked to stop (StoppingRuns), as it tells the ends it has
// yet to record (HeldExits).

// StoppingRun is a run the engine has asked to stop, not yet out: the
// request (the state the job ends in once out, why, since when: what the
// store keeps, stoprequest.go), and KillBy, when its machine kills it if
// it has not exited (the grace period's end), zero when the engine knows
// no grace period.
type StoppingRun struct {
	job.StopRequest
	KillBy time.Time
}

// noteStopping publishes the runs of e.runs asked to stop that still
// have parts running.
func (e *Engine) noteStopping() {
	var byJob map[int64]StoppingRun
	grace := time.Duration(e.cfg.Scheduler.Config().HandoverS * float64(time.Second))
	for id, r := range e.runs {
		if r.stop == "" || r.stopAsked.IsZero() || len(r.parts) == 0 {
			continue
		}
		s := StoppingRun{StopRequest: r.stopRequest()}
		if grace > 0 {
			s.KillBy = r.stopAsked.Add(grace)
		}
		if byJob == nil {
			byJob = make(map[int64]StoppingRun)
		}
		byJob[id] = s
	}
	e.stoppingRuns.set(byJob)
}

// StoppingRuns returns, by job, the runs asked to stop that have not
// exited, as of the last pass.
func (e *Engine) StoppingRuns() map[int64]StoppingRun {
	return e.stoppingRuns.get()
}
