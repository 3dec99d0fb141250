package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/salussim"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/core/whatif"
)

// What-if on the cluster's own history (docs/simulator.md): an admin
// replays the jobs finished in the last days under other policies and
// knobs (core/whatif), beside what actually happened. A replay is
// bounded: at most MaxWhatIfJobs jobs, WhatIfTimeout of work.
const (
	MaxWhatIfDays = 90
	MaxWhatIfJobs = 5000
	// maxWhatIfThresholds bounds the queue limits of a replay (queues
	// less one).
	maxWhatIfThresholds = 16
	WhatIfTimeout       = 30 * time.Second
)

// WhatIfInput is what a replay is asked for, checked.
type WhatIfInput struct {
	Days       int
	Policies   []string
	Thresholds []float64 // nil: the scheduler's defaults
	// MinRuntimeS is the minimum runtime before a reclaim; 0: none.
	MinRuntimeS float64
	// HalfLifeS is the usage half-life; 0: no decay.
	HalfLifeS float64
	Sharing   salussim.Sharing
}

// Salus reports whether the replay shares GPUs as Salus does.
func (in WhatIfInput) Salus() bool { return in.Sharing == salussim.SharingSalus }

// WhatIfPolicies are the policies a replay may compare, each with its
// rules other than its first: "tiresias-l", "gittins:...".
func WhatIfPolicies() []string {
	var out []string
	for _, p := range sched.Policies() {
		out = append(out, p)
		for _, r := range sched.PolicyRules(p)[min(1, len(sched.PolicyRules(p))):] {
			out = append(out, p+":"+r)
		}
	}
	return out
}

// DefaultWhatIf is a replay's first state: the live scheduler's policy
// and knobs, beside the policies an admin would most likely compare.
func (s *App) DefaultWhatIf() WhatIfInput {
	sc := s.cfg.Engine.Scheduler()
	cfg := sc.Config()
	in := WhatIfInput{Days: 7, Thresholds: cfg.Thresholds, MinRuntimeS: max(cfg.MinRuntimeS, 0), HalfLifeS: max(s.cfg.Engine.HalfLifeS(), 0)}
	live := sim.CandidateLabel(cfg.Policy, sc.Rule())
	in.Policies = []string{live}
	for _, p := range []string{"fifo", "tiresias-l", "tiresias-g"} {
		if !slices.Contains(in.Policies, p) {
			in.Policies = append(in.Policies, p)
		}
	}
	return in
}

// ParseWhatIf reads a replay's input from a form's or a query's
// parameters over def: days, policy (repeated or comma-separated),
// thresholds, min_runtime_s, half_life and sharing; a bad one is an
// Invalid *Error naming it.
func ParseWhatIf(params map[string][]string, def WhatIfInput) (WhatIfInput, error) {
	in := def
	get := func(k string) string {
		if vs := params[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	if v := get("days"); v != "" {
		d, err := strconv.Atoi(v)
		if err != nil || d < 1 || d > MaxWhatIfDays {
			return in, invalid("days", "days: must be a whole number of days from 1 to %d", MaxWhatIfDays)
		}
		in.Days = d
	}
	if ps, ok := params["policy"]; ok {
		names, err := sim.ParseCandidates(strings.Join(ps, ","))
		if err != nil {
			return in, invalid("policy", "policy: %v", err)
		}
		if len(names) > len(sched.Policies())+4 {
			return in, invalid("policy", "policy: at most %d policies at once", len(sched.Policies())+4)
		}
		in.Policies = names
	}
	if _, ok := params["thresholds"]; ok {
		v := get("thresholds")
		if n := strings.Count(v, ",") + 1; n > maxWhatIfThresholds {
			return in, invalid("thresholds", "thresholds: %d limits: at most %d", n, maxWhatIfThresholds)
		}
		thr, err := sim.ParseThresholds(v)
		if err != nil {
			return in, invalid("thresholds", "thresholds: %v", err)
		}
		in.Thresholds = thr
	}
	if v := get("min_runtime_s"); v != "" {
		m, err := strconv.ParseFloat(v, 64)
		if err != nil || !(m >= 0) || m > 30*24*3600 {
			return in, invalid("min_runtime_s", "min_runtime_s: must be seconds from 0 (none) to 2592000")
		}
		in.MinRuntimeS = m
	}
	if v := get("half_life"); v != "" {
		h, err := trace.ParseDuration(v)
		if err != nil || h > 3660*24*3600 {
			return in, invalid("half_life", "half_life: must be a duration such as 7d, 168h or 3600 (seconds), 0 for no decay")
		}
		in.HalfLifeS = h
	}
	if v := get("sharing"); v != "" {
		sh, err := salussim.ParseSharing(v)
		if err != nil {
			return in, invalid("sharing", "sharing: %v", err)
		}
		in.Sharing = sh
	}
	return in, nil
}

// WhatIfReport is a replay's report (core/whatif's): the API answers it
// as it is, the admin page draws it.
type WhatIfReport = whatif.Report

// WhatIf runs a replay for a, an admin: the jobs finished in the last
// in.Days, on the GPUs the store saw in that window, with the store's
// teams, under each of in.Policies. A window with no GPU or no job to
// replay is Unprocessable; a replay past WhatIfTimeout, Unavailable.
func (s *App) WhatIf(ctx context.Context, a Actor, in WhatIfInput) (*WhatIfReport, error) {
	if a.User.Role != RoleAdmin {
		return nil, forbidden("only admins may replay the cluster's history")
	}
	if len(in.Policies) == 0 {
		return nil, invalid("policy", "policy: tick at least one policy")
	}
	ctx, cancel := context.WithTimeout(ctx, WhatIfTimeout)
	defer cancel()
	since := s.cfg.Now().Add(-time.Duration(in.Days) * 24 * time.Hour)
	recs, err := WhatIfHistory(ctx, s.cfg.Store, since, MaxWhatIfJobs)
	if err != nil {
		return nil, stored(err)
	}
	gpus, err := GPUsSeen(ctx, s.cfg.Store, since)
	if err != nil {
		return nil, stored(err)
	}
	teams, err := WhatIfTeams(ctx, s.cfg.Store)
	if err != nil {
		return nil, stored(err)
	}
	live := s.cfg.Engine.Scheduler().Config()
	cfg := sim.Config{
		Sched: sched.Config{Thresholds: in.Thresholds, MinRuntimeS: in.MinRuntimeS, OmitWaits: true,
			Placement: sched.PlaceNodes, PromoteKnob: live.PromoteKnob, SharePlacement: live.SharePlacement},
		Nodes: whatif.Nodes(gpus), Teams: teams, HalfLifeS: in.HalfLifeS, Sharing: in.Sharing,
	}
	if in.MinRuntimeS == 0 {
		cfg.Sched.MinRuntimeS = sched.NoMinRuntime
	}
	if in.HalfLifeS == 0 {
		cfg.HalfLifeS = -1 // no decay
	}
	if len(cfg.Nodes) == 0 {
		return nil, unprocessable("days", "days: no GPU was seen in the window, so there is no cluster to replay on")
	}
	rep, err := whatif.Compare(ctx, recs, whatif.Config{Candidates: in.Policies, Sim: cfg})
	switch {
	case errors.Is(err, whatif.ErrNoJobs):
		return nil, unprocessable("days", fmt.Sprintf("days: no job finished in the last %d days", in.Days))
	case errors.Is(err, context.DeadlineExceeded):
		return nil, &Error{Kind: Unavailable, Msg: fmt.Sprintf("the replay took longer than %v: ask for fewer days or policies", WhatIfTimeout), Err: err}
	case err != nil:
		return nil, err
	}
	if len(recs) == MaxWhatIfJobs {
		rep.Capped = true
	}
	return rep, nil
}

// unprocessable is a request that is well formed but names nothing to
// act on; field is the field to change.
func unprocessable(field, msg string) error {
	return &Error{Kind: Unprocessable, Field: field, Msg: msg}
}
