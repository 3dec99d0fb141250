package engine

import (
	"context"
	"errors"

	"github.com/gpuportal/gpuportal/core/job"
)

// A run asked to stop (preempted, cancelled, past its time limit,
// requeued) may take its grace period to save its work and exit. If the
// server restarts meanwhile, or the run's machine disconnects and comes
// back, the engine that sees the exit did not ask for it: it would read
// a checkpoint's exit 0 as success and SIGTERM's 143 as a failure to
// retry, and a cancelled job could start again. So the request is kept
// with the job (StopRecorder), and an engine that adopts a run from a
// connecting machine takes the request back from the store before it
// decides how the run ended: the run's exits wait for the next pass's
// read (handleExit, reconcile).

// StopRecorder is the part of Store that keeps the requests to stop runs.
type StopRecorder interface {
	// MarkStopping records that run req.Run of job id was asked to stop,
	// until the job's next run; the request comes back in the job's Stop
	// (UnfinishedEngineJobs). A run that is not the job's current one is
	// an error wrapping job.ErrConflict.
	MarkStopping(ctx context.Context, id int64, req job.StopRequest) error
}

// saveStop records r's stop request in the store, once per stop: a run
// whose last part has exited needs none (its outcome is recorded next),
// nor one stopped for outgrowing its lane, whose exit says so again.
func (e *Engine) saveStop(ctx context.Context, id int64, r *run) {
	if r.stop == "" || r.stop == r.stopKept || r.requeue != nil || len(r.parts) == 0 {
		return
	}
	if err := e.cfg.Store.MarkStopping(ctx, id, r.stopRequest()); err != nil {
		if !errors.Is(err, job.ErrConflict) {
			e.cfg.Logger.Error("record a request to stop a run: an engine that adopts the run before it exits will not know it",
				"job", id, "run", r.id, "to", r.stop, "err", err)
		}
		return
	}
	r.stopKept = r.stop
}

// stopRequest is r's request to stop, as the store keeps it and the
// pages show it; restoreStop takes it back.
func (r *run) stopRequest() job.StopRequest {
	return job.StopRequest{Run: r.id, To: r.stop, Reason: r.reason, Code: r.code, At: r.stopAsked}
}

// saveStops records the stop requests the store could not take when
// they were made (saveStop): a database out at that moment loses none
// that a later restart would need.
func (e *Engine) saveStops(ctx context.Context) {
	for id, r := range e.runs { // in any order: each write stands alone
		if r.stop != "" && r.stop != r.stopKept {
			e.saveStop(ctx, id, r)
		}
	}
}

// stopRequested returns j's request to stop run, if the store keeps one.
func stopRequested(j *Job, run int64) (job.StopRequest, bool) {
	if j.Stop == nil || j.Stop.Run != run {
		return job.StopRequest{}, false
	}
	return *j.Stop, true
}

// restoreStop takes back into r, adopted from a connecting machine, the
// request to stop it that an earlier engine (or this one, before the
// machine went away) recorded, and asks its parts to stop again: the
// request reached the machine before, but a stop that was lost with the
// connection is not repeated otherwise.
func (e *Engine) restoreStop(id int64, r *run, req job.StopRequest) {
	r.stop, r.reason, r.code, r.stopAsked, r.stopKept = req.To, req.Reason, req.Code, req.At, req.To
	r.limitStop = req.To == job.TimedOut
	r.exited = req.To == job.Failed
	for _, name := range sortedParts(r) {
		e.stopLater = append(e.stopLater, partRef{job.RunRef{Job: id, Run: r.id}, name})
	}
	e.cfg.Logger.Info("a run adopted from its machine was asked to stop before: asked again", "job", id, "run", r.id, "to", req.To, "asked", req.At)
}

// holdAdoptedExit keeps the exit of a run adopted from a connecting
// machine that the store has not been read for yet (reconcile): whether
// the run was asked to stop, and how many retries its job has, come from
// that read. The pass that reads it hands the exit back (adoptedExits).
func (e *Engine) holdAdoptedExit(ex job.Exit, r *run) bool {
	if !r.adopted {
		return false
	}
	e.heldAdopted = append(e.heldAdopted, ex)
	return true
}

// adoptedExits handles the exits holdAdoptedExit kept, once the pass has
// checked their runs against the store, and asks for a pass to act on
// the ends.
func (e *Engine) adoptedExits(ctx context.Context, exits []job.Exit) {
	for _, ex := range exits {
		e.handleExit(ctx, ex)
	}
	if len(exits) > 0 {
		e.Wake()
	}
}
