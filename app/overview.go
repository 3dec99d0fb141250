package app

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// The admin page's overview: every account with its API tokens, every
// team's share, and the latest entries of the audit log.

// OverviewStore is what the admin's overview reads.
type OverviewStore interface {
	AllAPITokens(ctx context.Context, now time.Time) (map[int64][]models.APIToken, error)
	AuditLog(ctx context.Context, limit int) ([]models.AuditEntry, error)
}

// AdminOverview is what the admin page shows.
type AdminOverview struct {
	Users []api.User
	// Tokens are each user's unexpired API tokens, newest first, by
	// user name.
	Tokens map[string][]api.APIToken
	// Teams are every team's share as set (guarantee, weight, per-user
	// cap, time limits), by name.
	Teams []api.TeamShare
	// Audit are the latest entries of the audit log, newest first.
	Audit []api.AuditEntry
}

// teamShareAPI is t's share as set, without the figures of the moment
// (GPUs in use, usage, fair-share factor).
func teamShareAPI(t *models.Team) api.TeamShare {
	return api.TeamShare{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, Weight: t.Weight, MaxGPUsPerUser: t.MaxGPUsPerUser,
		DefaultTimeLimitS: t.DefaultTimeLimitS, MaxTimeLimitS: t.MaxTimeLimitS}
}

// Teams lists every team's share as set, by name, for anyone signed in.
func (s *App) Teams(ctx context.Context, a Actor) ([]api.TeamShare, error) {
	if err := active(a); err != nil {
		return nil, err
	}
	ts, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		return nil, stored(err)
	}
	out := make([]api.TeamShare, 0, len(ts))
	for i := range ts {
		out = append(out, teamShareAPI(&ts[i]))
	}
	return out, nil
}

// AdminOverview is the admin page's overview with the latest audit
// entries, at most audit of them: for an admin.
func (s *App) AdminOverview(ctx context.Context, a Actor, audit int) (AdminOverview, error) {
	var out AdminOverview
	if err := active(a); err != nil {
		return out, err
	}
	if err := onlyAdmins(a); err != nil {
		return out, err
	}
	us, err := s.cfg.Store.Users(ctx)
	if err != nil {
		return out, stored(err)
	}
	tokens, err := s.cfg.Store.AllAPITokens(ctx, s.cfg.Now())
	if err != nil {
		return out, stored(err)
	}
	out.Tokens = make(map[string][]api.APIToken, len(tokens))
	for i := range us {
		out.Users = append(out.Users, userAPI(&us[i]))
		for _, t := range tokens[us[i].ID] {
			out.Tokens[us[i].Name] = append(out.Tokens[us[i].Name], tokenAPI(t))
		}
	}
	if out.Teams, err = s.Teams(ctx, a); err != nil {
		return out, err
	}
	es, err := s.cfg.Store.AuditLog(ctx, audit)
	if err != nil {
		return out, stored(err)
	}
	for _, e := range es {
		out.Audit = append(out.Audit, api.AuditEntry{At: e.At, Actor: e.Actor, Action: e.Action, Target: e.Target, Detail: e.Detail, From: e.From})
	}
	return out, nil
}

// IsAdmin reports whether u is an admin.
func IsAdmin(u *User) bool { return u.Role == RoleAdmin }

// CheckName says what is wrong with the name of a user or team that a
// form names, naming the field.
func CheckName(name string) error {
	if err := models.CheckName(name); err != nil {
		return invalid("name", "name: %s", err)
	}
	return nil
}
