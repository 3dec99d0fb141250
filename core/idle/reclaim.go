package idle

import "time"

// Policy says which idle runs a team lets the portal reclaim (stop, so
// that their GPUs go to waiting jobs), and for how long an owner may
// postpone that with "keep alive".
type Policy struct {
	// Sessions: idle interactive sessions are reclaimed.
	Sessions bool
	// Batch: idle batch jobs are preempted (requeued) too.
	Batch bool
	// MaxKeepAlive is the longest keep-alive an owner may ask for at once.
	MaxKeepAlive time.Duration
}

// Reclaims reports whether p lets the portal reclaim an idle session
// (session) or an idle batch job (!session).
func (p Policy) Reclaims(session bool) bool {
	if session {
		return p.Sessions
	}
	return p.Batch
}

// Action is what to do with a running job now.
type Action int

// The actions, from least to most drastic.
const (
	// Leave: not idle, kept alive, or the team's policy spares it.
	Leave Action = iota
	// Warn: idle; it will be reclaimed at Verdict.ReclaimAt unless its GPUs
	// work again or its owner keeps it alive.
	Warn
	// Reclaim: idle for longer than the grace: stop it now.
	Reclaim
)

func (a Action) String() string {
	switch a {
	case Warn:
		return "warn"
	case Reclaim:
		return "reclaim"
	}
	return "leave"
}

// Case is what Decide needs to know about one running job.
type Case struct {
	// State is Detect's verdict on the run now.
	State State
	// Session: the job is an interactive session (else a batch job).
	Session bool
	// KeepAliveUntil: its owner asked to keep it until then (zero: never).
	KeepAliveUntil time.Time
}

// Verdict is Decide's answer.
type Verdict struct {
	Action Action
	// IdleAt is when the run became idle by the rule (State.Since + After).
	IdleAt time.Time
	// ReclaimAt is when it is (or was due to be) reclaimed: the later of
	// IdleAt + grace and the keep-alive's end. Zero with Leave.
	ReclaimAt time.Time
}

// Decide says what to do with a running job as of now: leave it, warn
// its owner, or reclaim it. A run is warned as soon as it is idle by the
// rule (State.Idle) and reclaimed grace later; a keep-alive postpones
// both the warning and the reclaim until it ends (the idle time before
// the keep-alive's end does not count towards the grace twice: the
// reclaim comes grace after the later of becoming idle and the
// keep-alive's end). A team's policy that spares the job's kind leaves
// it alone, however idle.
func Decide(rule Rule, p Policy, grace time.Duration, c Case, now time.Time) Verdict {
	if !rule.Valid() || !c.State.Known || !c.State.Idle || c.State.Since.IsZero() {
		return Verdict{}
	}
	if !p.Reclaims(c.Session) {
		return Verdict{}
	}
	if now.Before(c.KeepAliveUntil) {
		return Verdict{}
	}
	idleAt := c.State.Since.Add(rule.After)
	from := idleAt
	if c.KeepAliveUntil.After(from) {
		from = c.KeepAliveUntil
	}
	v := Verdict{Action: Warn, IdleAt: idleAt, ReclaimAt: from.Add(max(grace, 0))}
	if !now.Before(v.ReclaimAt) {
		v.Action = Reclaim
	}
	return v
}
