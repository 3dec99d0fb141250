package job

import (
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/memest"
)

// No loop without progress (docs/salus.md): a sharing job the gate stops
// for outgrowing its lane goes back to the queue with a larger estimate;
// one that comes back with no larger estimate waits longer each time and
// is held past a bound. The engine builds the Requeue, the store applies
// its Outcome to the job it holds.

// MaxRequeueStalls is how many requeues in a row without progress
// (Requeue.Outcome) hold a sharing job.
const MaxRequeueStalls = 5

// Requeue is the return of a sharing job to the queue after the gate
// stopped it for outgrowing its lane (the engine's Store.MarkRequeued).
type Requeue struct {
	// Estimate is what the job runs again with, unpadded: no smaller than
	// what it measured or asked for (memest.Tracker.Requeue).
	Estimate memest.Estimate
	Node     string // where it outgrew its lane
	At       time.Time
	// Backoff is the wait after the first requeue without progress; it
	// doubles with each further one.
	Backoff time.Duration
}

// RequeueOutcome is what a requeue does to the job.
type RequeueOutcome struct {
	// Stalls counts the requeues in a row without progress, this one
	// included; 0 when it made progress.
	Stalls int
	// RetryAt is when the job may start again: nil for at once, and for
	// never when Held.
	RetryAt *time.Time
	// Held: the job stays queued but is never scheduled; its owner
	// cancels it and submits it again (Reason says with what).
	Held   bool
	Reason string
}

// Outcome decides the requeue of a job whose run started from estimate
// started, after stalls requeues in a row without progress. A requeue
// makes progress when it brings a larger estimate, P or E: the next run
// is admitted with more room. One that brings no larger estimate gives
// the next run what this one had, and that run would end the same way:
// a stall. The job then waits Backoff, doubled for each earlier stall,
// and the MaxRequeueStalls-th stall in a row holds it.
func (rq Requeue) Outcome(started memest.Estimate, stalls int) RequeueOutcome {
	est := rq.Estimate
	if est.PersistentMiB > started.PersistentMiB || est.EphemeralMiB > started.EphemeralMiB {
		return RequeueOutcome{Reason: fmt.Sprintf("outgrew its lane: requeued with E=%d MiB, P=%d MiB (on %s)",
			est.EphemeralMiB, est.PersistentMiB, rq.Node)}
	}
	n := max(stalls, 0) + 1
	if n >= MaxRequeueStalls {
		return RequeueOutcome{Stalls: n, Held: true, Reason: fmt.Sprintf(
			"held: requeued %d times in a row for outgrowing its lane with no larger estimate (E=%d MiB, P=%d MiB, last on %s), "+
				"so another run would end the same way; cancel it and submit it again with --mem-ephemeral-mib above %d, or without --share",
			n, est.EphemeralMiB, est.PersistentMiB, rq.Node, est.EphemeralMiB)}
	}
	at := rq.At.Add(rq.Backoff << (n - 1))
	return RequeueOutcome{Stalls: n, RetryAt: &at, Reason: fmt.Sprintf(
		"outgrew its lane again with no larger estimate (E=%d MiB, P=%d MiB, on %s): requeue %d of %d without progress before it is held; next try at %s",
		est.EphemeralMiB, est.PersistentMiB, rq.Node, n, MaxRequeueStalls, at.Format(time.TimeOnly))}
}
