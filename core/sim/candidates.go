package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/core/sched"
)

// ParseCandidates splits a comma-separated list of candidates to compare
// and checks every one: a policy, or policy:rule for one of its rules
// (sched.PolicyRules). Blank entries are skipped; an empty list is an
// error.
func ParseCandidates(s string) ([]string, error) {
	known := map[string]bool{}
	for _, p := range sched.Policies() {
		known[p] = true
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		pol, rule := SplitCandidate(p)
		if !known[pol] {
			return nil, fmt.Errorf("unknown policy %q (known: %s)", pol, strings.Join(sched.Policies(), ", "))
		}
		if rules := sched.PolicyRules(pol); rule != "" && !slices.Contains(rules, rule) {
			if len(rules) == 0 {
				return nil, fmt.Errorf("%q: policy %s has one rule, no choice of rules", p, pol)
			}
			return nil, fmt.Errorf("%q: unknown rule %q for %s (known: %s)", p, rule, pol, strings.Join(rules, ", "))
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("no policy given")
	}
	return out, nil
}

// ParseThresholds reads comma-separated queue limits, such as
// "3250,7200": positive, finite and increasing. The empty string is no
// limits (nil): the scheduler's defaults.
func ParseThresholds(s string) ([]float64, error) {
	var out []float64
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for i, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 1) {
			return nil, fmt.Errorf("limit %d is %q, want a positive number of GPU-seconds", i+1, f)
		}
		if i > 0 && v <= out[i-1] {
			return nil, fmt.Errorf("limits must increase (%v then %v)", out[i-1], v)
		}
		out = append(out, v)
	}
	return out, nil
}
