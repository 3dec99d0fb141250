package engine

import (
	"maps"
	"sync"
	"time"
)

// Exits held. A run's outcome the store cannot take (its disk is full,
// it is out, or the leader is fenced) is held and tried again every pass
// (runs.go); meanwhile the store still says the job runs. So that pages
// say what is known, not what the store has, the engine tells which
// jobs' runs have ended with their outcome not yet recorded (HeldExits).

// HeldExit is a run's end the store has yet to record.
type HeldExit struct {
	Run      int64
	Node     string
	ExitCode int // the run's: its first part's failure, if any
	// Infra: the cluster ended the run (a fence, a lost machine), not
	// the job; the job is requeued once it is recorded.
	Infra bool
	// At is when the run ended (its agent's clock), Since when the store
	// first failed to take it, and Err why (the last failure).
	At, Since time.Time
	Err       error
}

// published is a view of the engine's, by job, that the Run goroutine
// sets whole and other goroutines read (held outcomes, runs asked to
// stop).
type published[V any] struct {
	mu sync.Mutex
	m  map[int64]V
}

// set replaces the view with m, which the caller gives up.
func (b *published[V]) set(m map[int64]V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.m = m
}

// get returns a copy of the view.
func (b *published[V]) get() map[int64]V {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.m)
}

// noteHeld publishes the held outcomes, e.unrecorded.
func (e *Engine) noteHeld() {
	byJob := make(map[int64]HeldExit, len(e.unrecorded))
	for _, u := range e.unrecorded {
		h := HeldExit{Run: u.r.id, Node: u.ex.Node, ExitCode: u.ex.ExitCode, Infra: u.ex.Infra, At: u.ex.At, Since: u.since, Err: u.err}
		if u.r.code != nil {
			h.ExitCode = *u.r.code
		}
		if h.At.IsZero() {
			h.At = u.since
		}
		byJob[u.ex.JobID] = h
	}
	e.heldExits.set(byJob)
}

// HeldExits returns, by job, the runs that ended with their outcome not
// yet recorded.
func (e *Engine) HeldExits() map[int64]HeldExit {
	return e.heldExits.get()
}
