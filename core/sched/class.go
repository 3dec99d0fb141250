package sched

import "fmt"

// Job classes (docs/scheduling.md, "Job classes"): what kind of work a
// job is, for the rules that tell kinds apart. A batch job is ordered,
// demoted and preempted by the policy, and reclaimed when it borrows. An
// interactive session (a notebook, a terminal, a web app someone works
// in) has a person waiting on it: it stays in queue 0 whatever its
// service, the policy never preempts it, and a team under its guarantee
// reclaims it only when the batch jobs that borrow cannot free enough.
//
// Each rule asks the class through a method (topQueue, preemptible), so
// that a class added later (batch at a high or a low priority, say)
// states its own answers in one place.

// Class is what kind of work a job is. The zero value is ClassBatch.
type Class uint8

// The classes a job may be of.
const (
	// ClassBatch: a batch job (training, a script). The default.
	ClassBatch Class = iota
	// ClassSession: an interactive session.
	ClassSession
)

// classNames are the classes' names, as traces and the portal write them.
var classNames = [...]string{ClassBatch: "batch", ClassSession: "session"}

// String names the class: "batch", "session".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// ParseClass reads a class by its name; "" is ClassBatch.
func ParseClass(s string) (Class, error) {
	if s == "" {
		return ClassBatch, nil
	}
	for c, name := range classNames {
		if s == name {
			return Class(c), nil
		}
	}
	return 0, fmt.Errorf("unknown job class %q: want batch or session", s)
}

// topQueue: the class stays in queue 0 whatever the service it attains;
// the queue policies never demote it (queues.go).
func (c Class) topQueue() bool { return c == ClassSession }

// preemptible: the policy may preempt a job of the class for a job
// ranked above it, and a team under its guarantee may reclaim it among
// the first borrowers. A job of a class that is not is never preempted
// by the policy; it is reclaimed only as a last resort (fair.go,
// nextFairVictim).
func (c Class) preemptible() bool { return c != ClassSession }
