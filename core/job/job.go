// Package job names the states of a job's life cycle, shared by the
// engine, the store and the portal.
package job

// State is a job's place in its life cycle.
type State string

// The job states. Queued, Running and Preempted are unfinished; the others
// are final.
const (
	Queued    State = "queued"
	Running   State = "running"
	Preempted State = "preempted"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// States lists every state, in life-cycle order.
var States = []State{Queued, Running, Preempted, Succeeded, Failed, Cancelled}

// Final reports whether a job in state s will never run again.
func (s State) Final() bool {
	return s == Succeeded || s == Failed || s == Cancelled
}

// Waiting reports whether a job in state s waits for GPUs.
func (s State) Waiting() bool {
	return s == Queued || s == Preempted
}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, k := range States {
		if s == k {
			return true
		}
	}
	return false
}
