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

// heldExits is the engine's view of its held outcomes, read by other
// goroutines; the Run goroutine sets it whenever they change.
type heldExits struct {
	mu    sync.Mutex
	byJob map[int64]HeldExit
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
	e.heldExits.mu.Lock()
	defer e.heldExits.mu.Unlock()
	e.heldExits.byJob = byJob
}

// HeldExits returns, by job, the runs that ended with their outcome not
// yet recorded.
func (e *Engine) HeldExits() map[int64]HeldExit {
	e.heldExits.mu.Lock()
	defer e.heldExits.mu.Unlock()
	return maps.Clone(e.heldExits.byJob)
}
