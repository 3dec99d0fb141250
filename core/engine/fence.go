package engine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// The leader's fence. A replica schedules only while it holds the leader
// lock; when it cannot confirm the lock (the database is out, or its
// session ended), another replica may take over once the database
// answers it. So the engine stops at once everything that decides or
// records: no pass runs (no start, preemption, requeue, cancel or
// reason), and no outcome is written. What it keeps doing is what keeps
// the cluster as it is: machines stay connected (their runs go on), exits
// are taken in and held, unacknowledged, as their agents keep them
// durably until they are (runs.go), and stops the cluster asked for
// before still go out. When the lock is taken again, the next pass
// records the held exits first, then schedules from the store as a new
// leader's first pass does. A replica that cannot take it again steps
// down without unfencing until its Run has returned; then StepDown
// (replicas.go) makes the engine a follower's (server/serve_leader.go).

// fence is the engine's fence state; its own lock, as the replica's
// lease watcher sets it from another goroutine.
type fence struct {
	mu     sync.Mutex
	why    string    // "" when not fenced
	since  time.Time // when fenced
	reload bool      // the lock was taken again: the next pass starts afresh
}

// Fence stops scheduling and the recording of outcomes until Unfence:
// why says what was lost, for the log and Fenced.
func (e *Engine) Fence(why string) {
	e.fence.mu.Lock()
	defer e.fence.mu.Unlock()
	if e.fence.why == "" {
		e.fence.since = e.cfg.Now()
		e.cfg.Logger.Warn("scheduling stopped: the leader lock cannot be confirmed; machines stay connected, exits are held until they are recorded",
			"why", why)
	}
	e.fence.why = why
}

// Unfence lets the engine schedule again once the lock is held anew. The
// next pass reads the store afresh, as the first pass of a new leader
// does: another replica may have led meanwhile.
func (e *Engine) Unfence() {
	e.fence.mu.Lock()
	defer e.fence.mu.Unlock()
	if e.fence.why != "" {
		e.cfg.Logger.Info("scheduling again: the leader lock is held",
			"fenced_for", e.cfg.Now().Sub(e.fence.since).Round(time.Millisecond))
		e.fence.reload = true
	}
	e.fence.why = ""
}

// Fenced says why the engine does not schedule now, and since when; ""
// when it does.
func (e *Engine) Fenced() (why string, since time.Time) {
	e.fence.mu.Lock()
	defer e.fence.mu.Unlock()
	return e.fence.why, e.fence.since
}

// mayDecide tells whether a pass may run: the engine is not fenced and,
// when Config.Confirm is set, the lock is confirmed now. A pass whose
// lock cannot be confirmed is skipped, so that no decision leaves a
// replica that may no longer lead, whatever the lease watcher has yet to
// notice. After an Unfence it clears what the store may have had from
// another leader.
func (e *Engine) mayDecide(ctx context.Context) bool {
	if why, _ := e.Fenced(); why != "" {
		return false
	}
	if e.cfg.Confirm != nil {
		if err := e.cfg.Confirm(ctx); err != nil {
			e.cfg.Logger.Warn("scheduling pass skipped: the leader lock cannot be confirmed", "err", err)
			return false
		}
	}
	e.fence.mu.Lock()
	reload := e.fence.reload
	e.fence.reload = false
	e.fence.mu.Unlock()
	if reload {
		e.reasons.reset()
		if err := e.loadNodeStates(ctx); err != nil {
			e.cfg.Logger.Warn("reload machines' states after taking the leader lock again", "err", err)
		}
		if err := e.loadReservations(ctx); err != nil {
			e.cfg.Logger.Warn("reload reservations after taking the leader lock again", "err", err)
		}
	}
	return true
}

// mayRecord tells whether an outcome may be written now.
func (e *Engine) mayRecord() bool {
	why, _ := e.Fenced()
	return why == ""
}

// errFenced is why an outcome waits while the engine is fenced.
var errFenced = errors.New("the leader lock cannot be confirmed: held until it is")
