package engine

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// LateExitRecorder is a Store that keeps the exit of a run that reached
// the engine after the run was ended without it (models.Store).
type LateExitRecorder interface {
	// RecordLateExit records exit ex if the store ended its run without
	// knowing how it ended (its machine was lost), and reports whether it
	// did. back is when the machine came back: a run that ended before
	// had ended while cut off, one that ended after was still running.
	RecordLateExit(ctx context.Context, ex job.Exit, back, now time.Time) (bool, error)
}

// lateExit passes on to the store the exit of a run the engine ended
// without it, its machine lost, which the machine reported when it came
// back: the store learns how and when the run really ended, and the
// job's history says so (a run that had succeeded while cut off ran
// again for nothing but the loss; one still running then was stopped).
// Other stale exits (a duplicate of one recorded already) are not
// passed on. A fenced engine records nothing; the exit is acknowledged
// all the same, as any stale exit.
func (e *Engine) lateExit(ctx context.Context, ex job.Exit) {
	key := partRef{ex.Ref(), ex.Node}
	if _, ok := e.endedUnseen[key]; !ok {
		return // a duplicate of a recorded exit, or a run ended before this engine led
	}
	lr, ok := e.cfg.Store.(LateExitRecorder)
	if !ok || !e.mayRecord() {
		return
	}
	delete(e.endedUnseen, key)
	e.mu.Lock()
	back := e.connected[ex.Node]
	e.mu.Unlock()
	done, err := lr.RecordLateExit(ctx, ex, back, e.cfg.Now())
	switch {
	case err != nil:
		e.cfg.Logger.Warn("record the exit of a run ended as lost", "job", ex.JobID, "run", ex.Run, "node", ex.Node, "err", err)
	case done:
		e.cfg.Logger.Info("a run ended as lost had ended on its machine: its exit is recorded", "job", ex.JobID, "run", ex.Run,
			"node", ex.Node, "exit_code", ex.ExitCode, "at", ex.At)
	}
}

// unseenKept is how long the engine remembers a run it ended without its
// exit, for the exit to be recorded if the machine comes back with it.
const unseenKept = 24 * time.Hour

// endedWithoutExit remembers that the engine ended ref's part on node
// without its exit, at now, and forgets those older than unseenKept.
func (e *Engine) endedWithoutExit(ref job.RunRef, node string, now time.Time) {
	for k, at := range e.endedUnseen {
		if now.Sub(at) > unseenKept {
			delete(e.endedUnseen, k)
		}
	}
	e.endedUnseen[partRef{ref, node}] = now
}
