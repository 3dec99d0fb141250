package sched

import "fmt"

// Job classes (docs/scheduling.md, "Job classes"): what kind of work a
// job is, for the rules that tell kinds apart. A batch job is ordered,
// demoted and preempted by the policy, and reclaimed when it borrows. An
// interactive session (a notebook, a terminal, a web app someone works
// in) has a person waiting on it: it stays in queue 0 whatever its
// service, the policy never preempts it, and a team under its guarantee
// reclaims it only when the batch jobs that borrow cannot free enough.
// Batch jobs come at three priorities, which a team allows its members:
// a high-priority job stays in queue 0 and goes ahead of its team's
// other waiting batch jobs; a low-priority one waits behind them, fills
// its team's guarantee last, and so is the first of its team reclaimed.
//
// Each rule asks the class through a method (topQueue, preemptible,
// band, fill), so that a class states its own answers in one place.

// Class is what kind of work a job is. The zero value is ClassBatch.
type Class uint8

// The classes a job may be of.
const (
	// ClassBatch: a batch job (training, a script) at normal priority.
	// The default.
	ClassBatch Class = iota
	// ClassSession: an interactive session.
	ClassSession
	// ClassHigh: a batch job at high priority.
	ClassHigh
	// ClassLow: a batch job at low priority, the first to make room.
	ClassLow
)

// classNames are the classes' names, as traces and the portal write them.
var classNames = [...]string{ClassBatch: "batch", ClassSession: "session", ClassHigh: "high", ClassLow: "low"}

// String names the class: "batch", "session", "high", "low".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// ParseClass reads a class by its name; "" and "normal" are ClassBatch.
func ParseClass(s string) (Class, error) {
	if s == "" || s == "normal" {
		return ClassBatch, nil
	}
	for c, name := range classNames {
		if s == name {
			return Class(c), nil
		}
	}
	return 0, fmt.Errorf("unknown job class %q: want batch (or normal), high, low or session", s)
}

// topQueue: the class stays in queue 0 whatever the service it attains;
// the queue policies never demote it (queues.go).
func (c Class) topQueue() bool { return c == ClassSession || c == ClassHigh }

// preemptible: the policy may preempt a job of the class for a job
// ranked above it, and a team under its guarantee may reclaim it among
// the first borrowers. A job of a class that is not is never preempted
// by the policy; it is reclaimed only as a last resort (fair.go,
// nextFairVictim).
func (c Class) preemptible() bool { return c != ClassSession }

// band is the class's place among its team's waiting jobs of one queue
// (classOrder): high-priority jobs first, then normal batch jobs and
// sessions, low-priority jobs last; within a band the policy's order
// holds. Sessions with interactive priority go ahead of all of them
// (band -1, given by classOrder within the team's budget).
func (c Class) band() int8 {
	switch c {
	case ClassHigh:
		return 0
	case ClassLow:
		return 2
	}
	return 1
}

// fill is the class's place when a team's running jobs fill its
// guarantee (fair.go, tiers): sessions first, then high-priority, normal
// and low-priority batch jobs, so that the team's low-priority jobs are
// the ones that borrow, and are reclaimed, first.
func (c Class) fill() int8 {
	switch c {
	case ClassSession:
		return 0
	case ClassHigh:
		return 1
	case ClassLow:
		return 3
	}
	return 2
}
