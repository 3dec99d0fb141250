package engine

import "fmt"

// A machine takes no new jobs while it is cordoned or draining. Cordon
// says only that: its running jobs keep running, with no intent that they
// end. Drain adds the intent to empty the machine: it shows as draining
// until its jobs are gone, then as drained. The two are kept apart, so
// that Slurm's drains (which the Slurm executor mirrors with SetDraining)
// never undo an admin's cordon, nor the other way round.

// SetCordoned cordons (on) or uncordons (off) a machine. The setting
// outlives a reconnect.
func (e *Engine) SetCordoned(name string, on bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.nodes[name]; !ok {
		return fmt.Errorf("%s: %w", name, ErrUnknownNode)
	}
	if e.cordoned == nil {
		e.cordoned = make(map[string]bool)
	}
	if on {
		e.cordoned[name] = true
	} else {
		delete(e.cordoned, name)
	}
	e.Wake()
	return nil
}

// unschedulable reports whether a machine takes no new jobs.
func (e *Engine) unschedulable(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.draining[name] || e.cordoned[name]
}
