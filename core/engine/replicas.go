package engine

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// Several server replicas may share one database; only the leader runs
// an engine (Run). The others still take submits and cancels: a submit is
// a queued row, which the leader's next pass reads; a cancel of a waiting
// job ends it in the store at once, and a cancel of a running one is
// recorded as a request that the leader's next pass carries out.

// CancelRequester is the part of Store that records a cancel for the
// leader.
type CancelRequester interface {
	// RequestCancel ends a waiting job cancelled at once, and records a
	// request to cancel a running one, which the leader's next pass
	// carries out (carryOutCancels); a finished job is an error wrapping
	// job.ErrConflict.
	RequestCancel(ctx context.Context, id int64, reason string, now time.Time) error
}

// SetFollower marks the engine of a replica that does not schedule:
// until Run starts, its Cancel records requests for the leader.
func (e *Engine) SetFollower() { e.follower.Store(true) }

// requestCancel records a cancel for whichever replica schedules.
func (e *Engine) requestCancel(ctx context.Context, id int64, reason string) error {
	return e.cfg.Store.RequestCancel(ctx, id, reason, e.cfg.Now())
}

// carryOutCancels acts on the cancels other replicas asked for: a running
// job is stopped and ends cancelled when it exits; a waiting one (a job
// requeued after the request) is cancelled. It returns the jobs left to
// schedule.
func (e *Engine) carryOutCancels(ctx context.Context, jobs []Job, now time.Time) []Job {
	out := jobs[:0]
	for i := range jobs {
		j := &jobs[i]
		if j.CancelRequest == "" {
			out = keep(out, jobs, i)
			continue
		}
		switch {
		case j.State == job.Running:
			if r := e.runs[j.ID]; r != nil && len(r.parts) > 0 && r.stop != job.Cancelled {
				r.stop, r.reason = job.Cancelled, j.CancelRequest
				e.cfg.Logger.Info("cancelling job as asked through another replica", "job", j.ID)
				e.stopAll(ctx, j.ID, r)
			}
			// Without a run here, its machine is away: once it is
			// requeued, the next pass cancels it.
			out = keep(out, jobs, i)
		case j.State.Waiting():
			if err := e.cfg.Store.Cancel(ctx, j.ID, j.CancelRequest, now); err != nil {
				e.cfg.Logger.Error("carry out cancel request", "job", j.ID, "err", err)
				out = keep(out, jobs, i)
				continue
			}
			e.cfg.Logger.Info("job cancelled as asked through another replica", "job", j.ID)
		default:
			out = keep(out, jobs, i)
		}
	}
	return out
}

// StepDown makes the engine of a leader that lost its lock for good (and
// whose Run has returned) a follower's, as if it had never led: it
// forgets the machines, the runs and the outcomes it held (the agents
// keep their exits, unacknowledged, for the new leader), drops the exits
// waiting to be taken in unacknowledged, and is fenced no more. A later
// Run starts afresh, as a new leader's does. It must not be called while
// Run runs.
func (e *Engine) StepDown() {
	e.follower.Store(true)
	e.mu.Lock()
	clear(e.nodes)
	clear(e.connected)
	e.mu.Unlock()
	clear(e.runs)
	clear(e.strays)
	clear(e.handover)
	clear(e.promised)
	clear(e.lostSince)
	clear(e.waiting)
	e.unrecorded, e.stopLater, e.recheck = nil, nil, time.Time{}
	e.stats.add(func(s *Stats) { s.UnrecordedExits = 0 })
	e.noteHeld()
	for drained := false; !drained; {
		select {
		case <-e.exits: // unacknowledged: its agent sends it to the new leader
		default:
			drained = true
		}
	}
	e.fence.mu.Lock()
	e.fence.why, e.fence.reload = "", false
	e.fence.mu.Unlock()
	e.cfg.Logger.Warn("stepped down: this replica no longer schedules; it serves pages and the API as a follower")
}
