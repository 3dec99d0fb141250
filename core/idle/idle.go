// Package idle decides whether a job holds GPUs it does not use: every
// GPU of its run has been at near-zero utilization for a while. It is
// pure: given a rule, the run's start, the time and each GPU's readings,
// it returns the verdict and since when, so that the job page, the team
// page, the cluster page, the API and anything that acts on idle jobs
// (reclaim) agree.
package idle

import (
	"fmt"
	"math"
	"time"
)

// Rule says when a job's GPUs count as idle: all of them under BelowPct
// utilization for at least After.
type Rule struct {
	After    time.Duration
	BelowPct float64
}

// DefaultRule is the rule where none is configured: 30 minutes under 5%.
var DefaultRule = Rule{After: 30 * time.Minute, BelowPct: 5}

// MinAfter and MaxAfter bound a rule's time, the server's (serve
// --idle-after) and a team's own alike: shorter than a reading's second
// judges noise; longer than a day reads days of history for each list.
const (
	MinAfter = time.Second
	MaxAfter = 24 * time.Hour
)

// CheckAfter says what is wrong with d as a rule's time, where 0 means
// "none of its own" (no flags for the server, the server's for a team).
func CheckAfter(d time.Duration) error {
	if d != 0 && (d < MinAfter || d > MaxAfter) {
		return fmt.Errorf("%v: want 0 or from %v to %v", d, MinAfter, MaxAfter)
	}
	return nil
}

// CheckBelow says what is wrong with pct as a rule's threshold.
func CheckBelow(pct float64) error {
	if math.IsNaN(pct) || pct <= 0 || pct > 100 {
		return fmt.Errorf("%v: want a percentage above 0, at most 100", pct)
	}
	return nil
}

// Override is the rule for a team whose own settings are own, where r is
// the server's: each of own's fields that is zero (not set) takes r's.
// The one place a team's rule is made; every judge of idle uses it.
func (r Rule) Override(own Rule) Rule {
	if own.After > 0 {
		r.After = own.After
	}
	if own.BelowPct > 0 {
		r.BelowPct = own.BelowPct
	}
	return r
}

// Valid reports whether r can flag anything.
func (r Rule) Valid() bool {
	return r.After > 0 && r.BelowPct > 0 && r.BelowPct <= 100
}

// Lookback is how far back the readings Detect looks at reach: twice
// After (at least ten minutes). A job idle for longer is "idle since at
// least" that far back (State.Capped), whatever else is known: so a
// caller that reads only this window gets the same answer as one that
// passes the whole run.
func (r Rule) Lookback() time.Duration {
	return max(2*r.After, 10*time.Minute)
}

// MaxGap is the longest stretch without readings that a run of low
// readings may span: a GPU not heard from for longer may have worked.
const MaxGap = 150 * time.Second

// Sample is one GPU's mean utilization over [T, T+Step): a per-second
// live reading or a minute of history.
type Sample struct {
	T       time.Time
	Step    time.Duration
	UtilPct float64
}

func (s Sample) end() time.Time { return s.T.Add(s.Step) }

// State is the verdict on one job at one time.
type State struct {
	// Idle: every GPU of the run has been under the rule's threshold for
	// at least the rule's time, as of now.
	Idle bool
	// Since is when the GPUs last worked (the end of the last reading at
	// or over the threshold on any of them); zero when they are not all
	// low now, or nothing is known.
	Since time.Time
	// Capped: the GPUs were low for the whole lookback (or since the run
	// started within it), so Since is "at least since".
	Capped bool
	// Known: every GPU has a recent reading; without one, nothing is said.
	Known bool
}

// Detect judges a run that started at start, as of now, from the readings
// of each of its GPUs (in time order, any mix of steps). Readings outside
// [max(start, now-Lookback), now] are ignored.
func Detect(r Rule, start, now time.Time, gpus [][]Sample) State {
	if !r.Valid() || len(gpus) == 0 || !now.After(start) {
		return State{}
	}
	from := start
	if lb := now.Add(-r.Lookback()); lb.After(from) {
		from = lb
	}
	lookback := from.After(start)
	st := State{Known: true}
	for _, ss := range gpus {
		since, known := lowSince(r, from, now, ss)
		if !known {
			return State{}
		}
		if since.IsZero() { // working now
			return State{Known: true}
		}
		if since.After(st.Since) {
			st.Since = since
		}
	}
	st.Capped = lookback && st.Since.Equal(from)
	st.Idle = now.Sub(st.Since) >= r.After
	return st
}

// lowSince is when one GPU's readings in [from, now] last were at or
// over the threshold: zero when the latest one is; from when none is.
// known is false when the GPU has no reading within MaxGap of now.
func lowSince(r Rule, from, now time.Time, ss []Sample) (since time.Time, known bool) {
	next := now // the start of the later reading walked so far
	seen := false
	for i := len(ss) - 1; i >= 0; i-- {
		s := ss[i]
		if s.T.After(now) {
			continue
		}
		if !s.end().After(from) {
			break
		}
		if next.Sub(s.end()) > MaxGap {
			if !seen {
				return time.Time{}, false // silent lately: unknown
			}
			return next, true // low only since the gap
		}
		if s.UtilPct >= r.BelowPct {
			if !seen {
				return time.Time{}, true // working now
			}
			return s.end(), true
		}
		seen = true
		next = s.T
	}
	if !seen {
		return time.Time{}, false
	}
	if next.Sub(from) > MaxGap {
		return next, true // readings start late in the window
	}
	return from, true
}
