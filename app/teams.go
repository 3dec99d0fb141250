package app

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// The actions on a team's policies. Its lead or an admin sets the caps
// of its members, its time limits, its idle and session policies; only
// an admin sets its share (guarantee, weight, per-user cap) or makes a
// team. Each change is audited and, where the scheduler reads it, wakes
// the engine.

// The bounds of a team's weight, its share among borrowers.
const (
	MinTeamWeight = 0.001
	MaxTeamWeight = 1e6
)

// MaxGuarantee bounds the guarantee a new team is made with.
const MaxGuarantee = 1_000_000

// CanLead reports whether u may set team's policies: its lead or an
// admin.
func CanLead(u *User, team string) bool {
	return u.Role == RoleAdmin || (u.Role == RoleLead && u.Team == team)
}

// leadOrAdmin refuses an actor who may not set team's what.
func leadOrAdmin(a Actor, team, what string) error {
	if !CanLead(a.User, team) {
		return forbidden("only the lead of %s or an admin may set its %s", team, what)
	}
	return nil
}

// noTeam is the answer for a team the store does not have.
func noTeam(err error, team string) error {
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("team %s not found", team), Err: err}
	}
	return stored(err)
}

// CreateTeam makes a team, for an admin.
func (s *App) CreateTeam(ctx context.Context, a Actor, req api.CreateTeam) error {
	if err := onlyAdmins(a); err != nil {
		return err
	}
	if err := models.CheckName(req.Name); err != nil {
		return invalid("name", "name: %s", err)
	}
	if g := req.GuaranteeGPUs; g < 0 || g > MaxGuarantee {
		return invalid("guarantee", "guarantee: must be a whole number of GPUs from 0 to %d", MaxGuarantee)
	}
	if _, err := s.cfg.Store.CreateTeam(ctx, req.Name, req.GuaranteeGPUs); errors.Is(err, models.ErrExists) {
		return invalid("name", "name: team %s already exists", req.Name)
	} else if err != nil {
		return stored(err)
	}
	return s.audit(ctx, a, "team.create", req.Name, fmt.Sprintf("guarantee %d", req.GuaranteeGPUs))
}

// SetTeamShare changes team's guarantee, weight and per-user cap, for an
// admin; a field req leaves out keeps its value.
func (s *App) SetTeamShare(ctx context.Context, a Actor, team string, req api.TeamShareUpdate) error {
	if err := onlyAdminsMay(a, AdminsSetShare); err != nil {
		return err
	}
	t, err := s.cfg.Store.Team(ctx, team)
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("no team %q", team), Err: err}
	} else if err != nil {
		return stored(err)
	}
	g, w, m := t.GuaranteeGPUs, t.Weight, t.MaxGPUsPerUser
	if req.GuaranteeGPUs != nil {
		g = *req.GuaranteeGPUs
	}
	if req.Weight != nil {
		w = *req.Weight
	}
	if req.MaxGPUsPerUser != nil {
		m = *req.MaxGPUsPerUser
	}
	switch {
	case g < 0 || g > MaxGPUs:
		return invalid("guaranteed_gpus", "guaranteed_gpus: must be from 0 to %d", MaxGPUs)
	case !(w >= MinTeamWeight) || w > MaxTeamWeight:
		// A weight near 0 makes the team's entitlement underflow to 0,
		// and its fair-share factor NaN.
		return invalid("weight", "weight: must be a number from %v to %v", MinTeamWeight, MaxTeamWeight)
	case m < 0 || m > MaxGPUs:
		return invalid("max_gpus_per_user", "max_gpus_per_user: must be from 0 (no cap) to %d", MaxGPUs)
	}
	if err := s.cfg.Store.SetTeamShare(ctx, team, g, w, m); err != nil {
		return stored(err)
	}
	s.cfg.Engine.Wake()
	return s.audit(ctx, a, "team.share", team, fmt.Sprintf("guarantee %d→%d GPUs, weight %g→%g, per-user cap %d→%d",
		t.GuaranteeGPUs, g, t.Weight, w, t.MaxGPUsPerUser, m))
}

// SetUserCap caps the GPUs of user, a member of team: for the team's
// lead or an admin.
func (s *App) SetUserCap(ctx context.Context, a Actor, team, user string, req api.UserCap) error {
	if req.MaxGPUs == nil {
		return invalid("max_gpus", "max_gpus: is required (0 removes the cap)")
	}
	if err := leadOrAdmin(a, team, "caps"); err != nil {
		return err
	}
	member, err := s.cfg.Store.UserByName(ctx, user)
	if errors.Is(err, models.ErrNotFound) || (err == nil && member.Team != team) {
		return invalid("user", "user: %q is not a member of %s", user, team)
	} else if err != nil {
		return stored(err)
	}
	limit := *req.MaxGPUs
	if limit < 0 || limit > MaxGPUs {
		return invalid("max_gpus", "max_gpus: must be from 0 (no cap) to %d", MaxGPUs)
	}
	if err := s.cfg.Store.SetUserCap(ctx, team, user, limit); err != nil {
		return stored(err)
	}
	s.cfg.Engine.Wake()
	return s.audit(ctx, a, "team.cap", team, fmt.Sprintf("%s: at most %d GPUs (0: no cap)", user, limit))
}

// SetTimeLimits sets team's default and longest time limit, as typed
// (job.ParseTimeLimit; "" for none): for its lead or an admin.
func (s *App) SetTimeLimits(ctx context.Context, a Actor, team string, req api.TimeLimits) error {
	if err := leadOrAdmin(a, team, "time limits"); err != nil {
		return err
	}
	d, err := job.ParseTimeLimit(req.Default)
	if err != nil {
		return invalid("default_time_limit", "default_time_limit: %s", err)
	}
	m, err := job.ParseTimeLimit(req.Max)
	if err != nil {
		return invalid("max_time_limit", "max_time_limit: %s", err)
	}
	if m > 0 && d > m {
		return invalid("default_time_limit", "default_time_limit: %s is above the maximum %s", job.FormatTimeLimit(d), job.FormatTimeLimit(m))
	}
	if err := s.cfg.Store.SetTeamTimeLimits(ctx, team, int64(d/time.Second), int64(m/time.Second)); err != nil {
		return noTeam(err, team)
	}
	return s.audit(ctx, a, "team.time_limits", team, fmt.Sprintf("default %s, at most %s", job.FormatTimeLimit(d), job.FormatTimeLimit(m)))
}

// SetIdlePolicy sets team's idle-GPU reclaim policy: for its lead or an
// admin.
func (s *App) SetIdlePolicy(ctx context.Context, a Actor, team string, req api.IdlePolicy) error {
	if err := leadOrAdmin(a, team, "idle policy"); err != nil {
		return err
	}
	if h := req.MaxKeepAliveHours; !(h >= 0) || h > 24*30 || (h > 0 && h*3600 < 1) {
		// Kept in seconds: less than one would be 0, the default.
		return invalid("max_keep_alive_hours", "max_keep_alive_hours: %v: want 0 (the default, %v hours), or 1 second (0.0003) to 720",
			h, models.DefaultMaxKeepAlive.Hours())
	}
	p := models.IdlePolicy{SpareSessions: !req.ReclaimSessions, ReclaimBatch: req.ReclaimBatch, MaxKeepAliveS: int64(req.MaxKeepAliveHours * 3600)}
	if v := req.IdleBelowPct; v != nil {
		if err := idle.CheckBelow(*v); err != nil {
			return invalid("idle_below_pct", "idle_below_pct: %s (null: the server's, %g)", err, s.cfg.Idle.BelowPct)
		}
		p.BelowPct = *v
	}
	if v := req.IdleAfterS; v != nil {
		if *v != math.Trunc(*v) || *v < 0 || *v > idle.MaxAfter.Seconds() || idle.CheckAfter(time.Duration(*v)*time.Second) != nil {
			return invalid("idle_after_s", "idle_after_s: %v: want whole seconds from %v to %v, or 0 or null (the server's, %v)",
				*v, idle.MinAfter.Seconds(), idle.MaxAfter.Seconds(), s.cfg.Idle.After.Seconds())
		}
		p.AfterS = int64(*v)
	}
	if err := s.cfg.Store.SetTeamIdlePolicy(ctx, team, p); err != nil {
		return noTeam(err, team)
	}
	return s.audit(ctx, a, "team.idle_policy", team, fmt.Sprintf("idle under %s for %s, reclaim sessions %v, batch jobs %v, keep-alive at most %vh",
		ownOrServer(p.BelowPct > 0, fmt.Sprintf("%g%%", p.BelowPct)), ownOrServer(p.AfterS > 0, ShortDuration(time.Duration(p.AfterS)*time.Second)),
		req.ReclaimSessions, req.ReclaimBatch, req.MaxKeepAliveHours))
}

// ownOrServer is v where a team set its own, else "the server's".
func ownOrServer(own bool, v string) string {
	if own {
		return v
	}
	return "the server's"
}

// ShortDuration is d as a team's idle time is written and read back on
// its page: "45m", "1h30m", "90s" (time.ParseDuration reads it).
func ShortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// SetSessionPolicy sets team's session policy: for its lead or an admin.
func (s *App) SetSessionPolicy(ctx context.Context, a Actor, team string, req api.SessionPolicy) error {
	if err := leadOrAdmin(a, team, "session policy"); err != nil {
		return err
	}
	if h := req.MaxSessionHours; !(h >= 0) || h > 24*365 || (h > 0 && math.Round(h*3600) < 1) {
		// Kept in seconds: less than one would be 0, no maximum.
		return invalid("max_session_hours", "max_session_hours: %v: want 0 (no maximum), or 1 second (0.0003) to 8760", h)
	}
	if req.PriorityGPUs < 0 || req.PriorityGPUs > MaxGPUs {
		return invalid("priority_gpus", "priority_gpus: %d: want 0 (no interactive priority) to %d", req.PriorityGPUs, MaxGPUs)
	}
	if req.MaxGPUs < 0 || req.MaxGPUs > MaxGPUs {
		return invalid("max_gpus", "max_gpus: %d: want 0 (no cap) to %d", req.MaxGPUs, MaxGPUs)
	}
	if req.MaxGPUs > 0 && req.PriorityGPUs > req.MaxGPUs {
		return invalid("priority_gpus", "priority_gpus: %d: more than max_gpus, %d, the GPUs the team's sessions may ask for at once", req.PriorityGPUs, req.MaxGPUs)
	}
	allowed := req.SessionsAllowed()
	p := models.SessionPolicy{MaxSessionS: int64(math.Round(req.MaxSessionHours * 3600)), SessionPriorityGPUs: req.PriorityGPUs,
		SessionsOff: !allowed, MaxSessionGPUs: req.MaxGPUs}
	if err := s.cfg.Store.SetTeamSessionPolicy(ctx, team, p); err != nil {
		return noTeam(err, team)
	}
	what := "sessions not allowed"
	if allowed {
		what = "sessions allowed, "
		if req.MaxGPUs > 0 {
			what += fmt.Sprintf("%d GPUs at once", req.MaxGPUs)
		} else {
			what += "no cap on their GPUs"
		}
	}
	return s.audit(ctx, a, "team.session_policy", team, fmt.Sprintf("%s; sessions at most %vh, %d GPUs with interactive priority", what, req.MaxSessionHours, req.PriorityGPUs))
}

// SessionTerms says, for each team a may submit to, what its session
// policy lets a session ask for now, a sentence a team: the submit
// form's words under "An interactive session", so that a session past
// them is not a surprise.
func (s *App) SessionTerms(ctx context.Context, a Actor) ([]string, error) {
	if err := active(a); err != nil {
		return nil, err
	}
	teams, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		return nil, stored(err)
	}
	var out []string
	for i := range teams {
		t := &teams[i]
		if !submitsTo(a.User, t.Name) {
			continue
		}
		if t.SessionsOff {
			out = append(out, fmt.Sprintf("Team %s does not allow interactive sessions (its session policy).", t.Name))
			continue
		}
		var terms []string
		if t.MaxSessionGPUs > 0 {
			asked, err := s.cfg.Store.SessionGPUs(ctx, t.Name)
			if err != nil {
				return nil, stored(err)
			}
			terms = append(terms, fmt.Sprintf("its sessions may ask for %d GPUs at once, %d asked for now", t.MaxSessionGPUs, asked))
		}
		if t.MaxSessionS > 0 {
			terms = append(terms, "each runs at most "+job.FormatTimeLimit(time.Duration(t.MaxSessionS)*time.Second))
		}
		if len(terms) > 0 {
			out = append(out, fmt.Sprintf("Team %s: %s.", t.Name, strings.Join(terms, "; ")))
		}
	}
	return out, nil
}

// SetBatchPolicy sets which batch priorities team's members may use and
// the cap on its high-priority GPUs, for an admin: a team's
// high-priority jobs stay in queue 0, which places them ahead of other
// teams' demoted jobs, so no lead grants it to their own team.
func (s *App) SetBatchPolicy(ctx context.Context, a Actor, team string, req api.BatchPolicy) error {
	if err := onlyAdminsMay(a, AdminsSetBatchPolicy); err != nil {
		return err
	}
	var list []string
	for _, name := range job.Priorities { // highest first, each once
		if slices.Contains(req.Priorities, name) {
			list = append(list, name)
		}
	}
	for _, p := range req.Priorities {
		if !slices.Contains(job.Priorities, p) {
			return invalid("priorities", "priorities: unknown priority %q: want high, normal or low", p)
		}
	}
	if len(list) == 0 {
		return invalid("priorities", "priorities: name at least one of high, normal and low")
	}
	if req.HighGPUs < 0 || req.HighGPUs > MaxGPUs {
		return invalid("high_gpus", "high_gpus: %d: want 0 (no cap) to %d", req.HighGPUs, MaxGPUs)
	}
	if err := s.cfg.Store.SetTeamBatchPolicy(ctx, team, models.BatchPolicy{Priorities: list, HighPriorityGPUs: req.HighGPUs}); err != nil {
		return noTeam(err, team)
	}
	limit := "no cap on high-priority GPUs"
	if req.HighGPUs > 0 {
		limit = fmt.Sprintf("high-priority jobs ask for at most %d GPUs", req.HighGPUs)
	}
	return s.audit(ctx, a, "team.batch_policy", team, fmt.Sprintf("priorities %s; %s", strings.Join(list, ", "), limit))
}
