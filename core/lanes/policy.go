package lanes

import (
	"fmt"
	"strings"
)

// Policy chooses which ready job of a lane runs the lane's next
// iteration.
type Policy string

// The iteration policies.
const (
	// Pack runs the ready job admitted first (arrival order). It is work
	// conserving: a job that is not ready does not hold up the others.
	Pack Policy = "pack"
	// Fair runs the ready job with the least GPU time so far.
	Fair Policy = "fair"
	// SRTF runs the ready job with the shortest remaining time, declared
	// or estimated. A job with no estimate ranks after every job with one,
	// so it runs only when no job with an estimate is ready.
	SRTF Policy = "srtf"
)

// Policies lists the iteration policies.
func Policies() []Policy { return []Policy{Pack, Fair, SRTF} }

// ParsePolicy checks a policy name; "" means Pack.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return Pack, nil
	case Pack, Fair, SRTF:
		return p, nil
	}
	return "", fmt.Errorf("unknown lane policy %q (known: pack, fair, srtf): %w", s, ErrBadInput)
}

// before reports whether a should run before b under policy p. Both are
// ready members of one lane. Ties go to the job admitted first.
func (p Policy) before(a, b *member) bool {
	switch p {
	case Fair:
		if a.gpuTime != b.gpuTime {
			return a.gpuTime < b.gpuTime
		}
	case SRTF:
		ra, oka := a.remaining()
		rb, okb := b.remaining()
		if oka != okb {
			return oka
		}
		if oka && ra != rb {
			return ra < rb
		}
	}
	return a.seq < b.seq
}
