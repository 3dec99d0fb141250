// Package job names the states of a job's life cycle and its runs, shared
// by the engine, the store and the portal, and what the engine and the
// machines say to each other about runs (Spec, Exit, Usage): a leaf of
// plain types, so that the engine drives machines without importing an
// agent.
package job

import (
	"errors"
	"strconv"
)

// State is a job's place in its life cycle.
type State string

// The job states. Queued, Running and Preempted are unfinished; the others
// are final. TimedOut: the job ran for its time limit and was stopped
// (SIGTERM, the grace period, SIGKILL). The names are stable: events,
// notifications and clients key on them.
const (
	Queued    State = "queued"
	Running   State = "running"
	Preempted State = "preempted"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	Cancelled State = "cancelled"
	TimedOut  State = "timed_out"
)

// States lists every state, in life-cycle order.
var States = []State{Queued, Running, Preempted, Succeeded, Failed, Cancelled, TimedOut}

// Final reports whether a job in state s will never run again.
func (s State) Final() bool {
	return s == Succeeded || s == Failed || s == Cancelled || s == TimedOut
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

// RunRef names one run of a job: its ID and the run's number, counted
// from 1 per job. Every start of a job is a new run; a report about a run
// that is not the job's current one never changes the job.
type RunRef struct {
	Job int64 `json:"job_id"`
	Run int64 `json:"run"`
}

// String formats the reference as "job 12 run 3".
func (r RunRef) String() string {
	return "job " + strconv.FormatInt(r.Job, 10) + " run " + strconv.FormatInt(r.Run, 10)
}

// ErrConflict is returned by a store for a change that the job's state
// does not allow, such as the end of a run that is not the job's current
// one: retrying it will not help.
var ErrConflict = errors.New("conflicts with the job's state")
