package engine

import "context"

// A machine takes no new jobs while it is cordoned or draining. Cordon
// says only that: its running jobs keep running, with no intent that they
// end. Drain adds the intent to empty the machine: it shows as draining
// until its jobs are gone, then as drained. The two are kept apart, so
// that Slurm's drains (which the Slurm executor mirrors with MirrorDraining)
// never undo an admin's cordon, nor the other way round.

// SetCordoned cordons (on) or uncordons (off) a machine. The setting
// outlives a reconnect and a restart, in the store (nodestate.go). On a
// follower it is recorded in the store for the leader, which applies it
// on its next pass.
func (e *Engine) SetCordoned(name string, on bool) error {
	return e.setNodeFlag(name, on, &e.cordoned, func(ns NodeStateStore, ctx context.Context) error {
		return ns.SetNodeCordoned(ctx, name, on, e.cfg.Now())
	})
}

// MirrorDraining drains (on) or resumes (off) a machine as the system
// that owns it does: the Slurm executor mirrors Slurm's drains with it.
// Unlike SetDraining it is not kept in the store, since that system says
// it again after a restart, and a kept drain whose end came while the
// server was down would outlive it.
func (e *Engine) MirrorDraining(name string, on bool) error {
	return e.setNodeFlag(name, on, &e.draining, nil)
}

// unschedulable reports whether a machine takes no new jobs.
func (e *Engine) unschedulable(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.draining[name] || e.cordoned[name]
}
