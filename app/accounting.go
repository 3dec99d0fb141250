package app

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gpuportal/gpuportal/accountingstore"
	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/accounting"
	"github.com/gpuportal/gpuportal/models"
)

// Accounting: what teams and users consumed over a range of UTC days.
// Researchers see their own usage, leads their team's (its members'),
// admins everyone's; asking beyond that is Forbidden, naming the field.

// MaxAccountingDays bounds the range of one accounting report.
const MaxAccountingDays = 366

// AccountingStore is what an accounting report reads.
type AccountingStore interface {
	accountingstore.Reader
}

// accountingRequest is a checked api.AccountingQuery.
type accountingRequest struct {
	from, to   time.Time // UTC days, both counted
	by         accounting.By
	period     accounting.Period
	team, user string
}

// parseAccounting reads q for a, with defaults: the month so far, by
// team (by user for a researcher), per day. A bad field is Invalid,
// naming it.
func parseAccounting(q api.AccountingQuery, a Actor, now time.Time) (accountingRequest, error) {
	today := accounting.DayOf(now)
	r := accountingRequest{from: time.Date(today.Year(), today.Month(), 1, 0, 0, 0, 0, time.UTC), to: today,
		by: accounting.ByTeam, period: accounting.PerDay, team: q.Team, user: q.User}
	if a.User.Role == RoleResearcher {
		r.by = accounting.ByUser
	}
	for _, f := range []struct {
		name, value string
		into        *time.Time
	}{{"from", q.From, &r.from}, {"to", q.To, &r.to}} {
		if f.value == "" {
			continue
		}
		d, err := time.Parse(time.DateOnly, f.value)
		if err != nil {
			return r, invalid(f.name, "%s: %q is not a day as YYYY-MM-DD (UTC)", f.name, f.value)
		}
		*f.into = d
	}
	if r.to.Before(r.from) {
		return r, invalid("to", "to: %s is before from (%s)", r.to.Format(time.DateOnly), r.from.Format(time.DateOnly))
	}
	if n := int(r.to.Sub(r.from).Hours()/24) + 1; n > MaxAccountingDays {
		return r, invalid("to", "to: the range holds %d days; at most %d may be asked at once", n, MaxAccountingDays)
	}
	var err error
	if q.By != "" {
		if r.by, err = accounting.ParseBy(q.By); err != nil {
			return r, invalid("by", "by: %v", err)
		}
	}
	if q.Period != "" {
		if r.period, err = accounting.ParsePeriod(q.Period); err != nil {
			return r, invalid("period", "period: %v", err)
		}
	}
	return r, nil
}

// accountingScope applies a's rights to r: researchers see their own
// usage, leads their team's, admins everyone's. It returns which rows a
// may see and how to name them, or a Forbidden *Error naming the field.
func accountingScope(a Actor, r accountingRequest) (func(accounting.Key) bool, string, error) {
	u := a.User
	team, user := r.team, r.user
	switch u.Role {
	case RoleAdmin:
	case RoleLead:
		if team != "" && team != u.Team {
			return nil, "", forbidden("team: a lead sees the accounting of their own team (%s), not of %s", u.Team, team)
		}
		team = u.Team
	default:
		if r.by == accounting.ByTeam {
			return nil, "", forbidden("by: a researcher sees only their own usage: ask by=user")
		}
		if user != "" && user != u.Name {
			return nil, "", forbidden("user: a researcher sees only their own usage, not %s's", user)
		}
		if team != "" && team != u.Team {
			return nil, "", forbidden("team: a researcher sees only their own usage")
		}
		user = u.Name
	}
	scope := "cluster"
	switch {
	case user != "":
		scope = "user " + user
	case team != "":
		scope = "team " + team
	}
	return func(k accounting.Key) bool {
		return (team == "" || k.Team == team) && (user == "" || k.User == user)
	}, scope, nil
}

// Accounting is the report q asks for, as a may see it; an allocated GPU
// counts idle under idleBelowPct percent utilization.
func (s *App) Accounting(ctx context.Context, a Actor, q api.AccountingQuery, idleBelowPct float64) (api.Accounting, error) {
	if err := active(a); err != nil {
		return api.Accounting{}, err
	}
	now := s.cfg.Now().UTC()
	r, err := parseAccounting(q, a, now)
	if err != nil {
		return api.Accounting{}, err
	}
	include, scope, err := accountingScope(a, r)
	if err != nil {
		return api.Accounting{}, err
	}
	if u := a.User; u.Role == RoleLead && r.user != "" && r.user != u.Name {
		member, err := s.cfg.Store.UserByName(ctx, r.user)
		if errors.Is(err, models.ErrNotFound) || (err == nil && member.Team != u.Team) {
			return api.Accounting{}, forbidden("user: a lead sees the accounting of the members of %s; %s is not one", u.Team, r.user)
		} else if err != nil {
			return api.Accounting{}, stored(err)
		}
	}
	end := r.to.AddDate(0, 0, 1)
	in, err := accountingstore.Read(ctx, s.cfg.Store, r.from, end, now, idleBelowPct/100)
	if err != nil {
		return api.Accounting{}, stored(err)
	}
	rep := accounting.Build(in.Days, in.Jobs, in.Runs, accounting.Options{From: r.from, To: end, By: r.by, Period: r.period, Include: include})
	out := api.Accounting{From: r.from.Format(time.DateOnly), To: r.to.Format(time.DateOnly), By: string(r.by),
		Period: string(r.period), IdleBelowPct: idleBelowPct, Scope: scope,
		Rows: make([]api.AccountingRow, 0, len(rep.Rows)), Periods: make([]api.AccountingRow, 0, len(rep.Periods)),
		Total: accountingRowAPI(rep.Total, accounting.Whole)}
	for _, row := range rep.Rows {
		out.Rows = append(out.Rows, accountingRowAPI(row, r.period))
	}
	for _, row := range rep.Periods {
		out.Periods = append(out.Periods, accountingRowAPI(row, r.period))
	}
	return out, nil
}

// accountingRowAPI converts a row, GPU-seconds to GPU-hours.
func accountingRowAPI(r accounting.Row, p accounting.Period) api.AccountingRow {
	h := func(s float64) float64 { return roundTo(s/3600, 4) }
	period := r.Period.Format(time.DateOnly)
	if p == accounting.PerMonth {
		period = r.Period.Format("2006-01")
	}
	return api.AccountingRow{Period: period, Team: r.Team, User: r.User,
		AllocatedGPUHours: h(r.Allocated), UsedGPUHours: h(r.Used), IdleGPUHours: h(r.Idle()),
		IdleAllocatedGPUHours: h(r.IdleAllocated), UnsampledGPUHours: h(r.Unsampled()),
		Jobs: r.Outcomes, PreemptedRuns: r.Preempted, RequeuedRuns: r.Requeued, JobsStarted: r.Started,
		ReclaimedGPUHours: h(r.ReclaimedGPUSeconds),
		QueueWaitMedianS:  roundTo(r.QueueWaitMedianS, 1), QueueWaitP95S: roundTo(r.QueueWaitP95S, 1)}
}

func roundTo(x float64, digits int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', digits, 64), 64)
	return v
}

// AccountingRights are what a's accounting page offers: a report by
// team (leads and admins), any team (admins), any user (leads, of their
// team, and admins).
type AccountingRights struct {
	ByTeam, PickTeam, PickUser bool
}

// AccountingRightsOf are a's rights on the accounting page.
func AccountingRightsOf(a Actor) AccountingRights {
	r := a.User.Role
	return AccountingRights{ByTeam: r != RoleResearcher, PickTeam: r == RoleAdmin, PickUser: r != RoleResearcher}
}
