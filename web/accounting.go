package web

import (
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/accountingstore"
	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/accounting"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// DefaultIdleBelowPct is the GPU utilization, in percent, under which an
// allocated GPU counts idle in accounting, unless Config says otherwise.
const DefaultIdleBelowPct = accounting.DefaultIdleBelowPct

// maxAccountingDays bounds the range of one accounting request.
const maxAccountingDays = 366

// accountingQuery is a parsed accounting request.
type accountingQuery struct {
	from, to   time.Time // UTC days, both counted
	by         accounting.By
	period     accounting.Period
	team, user string
	csv        bool
}

// parseAccountingQuery reads from, to, by, period, team, user and format,
// with defaults: the month so far, by team (by user for a researcher),
// per day. Errors are 400s naming the parameter.
func parseAccountingQuery(q url.Values, u *models.User, now time.Time) (accountingQuery, error) {
	today := accounting.DayOf(now)
	aq := accountingQuery{from: time.Date(today.Year(), today.Month(), 1, 0, 0, 0, 0, time.UTC), to: today,
		by: accounting.ByTeam, period: accounting.PerDay, team: q.Get("team"), user: q.Get("user")}
	if u.Role == models.RoleResearcher {
		aq.by = accounting.ByUser
	}
	for _, f := range []struct {
		name string
		into *time.Time
	}{{"from", &aq.from}, {"to", &aq.to}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return aq, badRequest("%s: %q is not a day as YYYY-MM-DD (UTC)", f.name, v)
		}
		*f.into = d
	}
	if aq.to.Before(aq.from) {
		return aq, badRequest("to: %s is before from (%s)", aq.to.Format(time.DateOnly), aq.from.Format(time.DateOnly))
	}
	if n := int(aq.to.Sub(aq.from).Hours()/24) + 1; n > maxAccountingDays {
		return aq, badRequest("to: the range holds %d days; at most %d may be asked at once", n, maxAccountingDays)
	}
	var err error
	if v := q.Get("by"); v != "" {
		if aq.by, err = accounting.ParseBy(v); err != nil {
			return aq, badRequest("by: %v", err)
		}
	}
	if v := q.Get("period"); v != "" {
		if aq.period, err = accounting.ParsePeriod(v); err != nil {
			return aq, badRequest("period: %v", err)
		}
	}
	switch q.Get("format") {
	case "", "json", "html":
	case "csv":
		aq.csv = true
	default:
		return aq, badRequest("format: %q is not json or csv", q.Get("format"))
	}
	return aq, nil
}

// accountingScope applies the asker's rights: researchers see their own
// usage, leads their team's, admins everyone's. It returns which rows the
// asker may see and how to name them, or a 403.
func accountingScope(u *models.User, aq accountingQuery) (func(accounting.Key) bool, string, error) {
	forbid := func(format string, args ...any) error {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf(format, args...))
	}
	team, user := aq.team, aq.user
	switch u.Role {
	case models.RoleAdmin:
	case models.RoleLead:
		if team != "" && team != u.Team {
			return nil, "", forbid("team: a lead sees the accounting of their own team (%s), not of %s", u.Team, team)
		}
		team = u.Team
	default:
		if aq.by == accounting.ByTeam {
			return nil, "", forbid("by: a researcher sees only their own usage: ask by=user")
		}
		if user != "" && user != u.Name {
			return nil, "", forbid("user: a researcher sees only their own usage, not %s's", user)
		}
		if team != "" && team != u.Team {
			return nil, "", forbid("team: a researcher sees only their own usage")
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

// accountingReport computes the report the request asks for, as the
// asker may see it.
func (s *Server) accountingReport(c echo.Context) (api.Accounting, accountingQuery, error) {
	u := currentUser(c)
	now := s.cfg.Now().UTC()
	aq, err := parseAccountingQuery(c.QueryParams(), u, now)
	if err != nil {
		return api.Accounting{}, aq, err
	}
	include, scope, err := accountingScope(u, aq)
	if err != nil {
		return api.Accounting{}, aq, err
	}
	if u.Role == models.RoleLead && aq.user != "" && aq.user != u.Name {
		member, err := s.cfg.Store.UserByName(c.Request().Context(), aq.user)
		if errors.Is(err, models.ErrNotFound) || (err == nil && member.Team != u.Team) {
			return api.Accounting{}, aq, echo.NewHTTPError(http.StatusForbidden,
				fmt.Sprintf("user: a lead sees the accounting of the members of %s; %s is not one", u.Team, aq.user))
		} else if err != nil {
			return api.Accounting{}, aq, err
		}
	}
	end := aq.to.AddDate(0, 0, 1)
	idle := s.idleBelowPct()
	in, err := accountingstore.Read(c.Request().Context(), s.cfg.Store, aq.from, end, now, idle/100)
	if err != nil {
		return api.Accounting{}, aq, err
	}
	rep := accounting.Build(in.Days, in.Jobs, in.Runs, accounting.Options{From: aq.from, To: end, By: aq.by, Period: aq.period, Include: include})
	out := api.Accounting{From: aq.from.Format(time.DateOnly), To: aq.to.Format(time.DateOnly), By: string(aq.by),
		Period: string(aq.period), IdleBelowPct: idle, Scope: scope,
		Rows: make([]api.AccountingRow, 0, len(rep.Rows)), Periods: make([]api.AccountingRow, 0, len(rep.Periods)),
		Total: accountingRowOf(rep.Total, accounting.Whole)}
	for _, r := range rep.Rows {
		out.Rows = append(out.Rows, accountingRowOf(r, aq.period))
	}
	for _, r := range rep.Periods {
		out.Periods = append(out.Periods, accountingRowOf(r, aq.period))
	}
	return out, aq, nil
}

func (s *Server) idleBelowPct() float64 {
	if s.cfg.AccountingIdleBelowPct > 0 {
		return s.cfg.AccountingIdleBelowPct
	}
	return DefaultIdleBelowPct
}

// accountingRowOf converts a row, GPU-seconds to GPU-hours.
func accountingRowOf(r accounting.Row, p accounting.Period) api.AccountingRow {
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

// apiAccounting answers GET /api/v1/accounting, as JSON or, with
// format=csv, as CSV.
func (s *Server) apiAccounting(c echo.Context) error {
	rep, aq, err := s.accountingReport(c)
	if err != nil {
		return err
	}
	if aq.csv {
		return writeAccountingCSV(c, rep)
	}
	return c.JSON(http.StatusOK, rep)
}

// outcomeStates are the jobs' final states, in life-cycle order, then
// any other state a row names (so a new final state gets a column).
func outcomeStates(rows []api.AccountingRow) []string {
	var out []string
	for _, s := range job.States {
		if s.Final() {
			out = append(out, string(s))
		}
	}
	var extra []string
	for _, r := range rows {
		for s := range r.Jobs {
			if !slices.Contains(out, s) && !slices.Contains(extra, s) {
				extra = append(extra, s)
			}
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}

// writeAccountingCSV writes the report's rows as CSV, one line per row,
// a header first; the totals are left out so that the lines sum to them.
func writeAccountingCSV(c echo.Context, rep api.Accounting) error {
	states := outcomeStates(rep.Rows)
	name := fmt.Sprintf("gpuportal-accounting-%s-%s-by-%s.csv", rep.From, rep.To, rep.By)
	c.Response().Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	c.Response().Header().Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	c.Response().WriteHeader(http.StatusOK)
	w := csv.NewWriter(c.Response())
	head := []string{"period", "team", "user", "allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours",
		"idle_allocated_gpu_hours", "unsampled_gpu_hours"}
	for _, s := range states {
		head = append(head, "jobs_"+s)
	}
	head = append(head, "preempted_runs", "requeued_runs", "reclaimed_gpu_hours", "jobs_started", "queue_wait_median_s", "queue_wait_p95_s")
	if err := w.Write(head); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	for _, r := range rep.Rows {
		line := []string{r.Period, r.Team, r.User, f(r.AllocatedGPUHours), f(r.UsedGPUHours), f(r.IdleGPUHours),
			f(r.IdleAllocatedGPUHours), f(r.UnsampledGPUHours)}
		for _, s := range states {
			line = append(line, strconv.Itoa(r.Jobs[s]))
		}
		line = append(line, strconv.Itoa(r.PreemptedRuns), strconv.Itoa(r.RequeuedRuns), f(r.ReclaimedGPUHours), strconv.Itoa(r.JobsStarted),
			f(r.QueueWaitMedianS), f(r.QueueWaitP95S))
		if err := w.Write(line); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}

// accountingPage shows the report on the portal; format=csv downloads it.
func (s *Server) accountingPage(c echo.Context) error {
	rep, aq, err := s.accountingReport(c)
	if err != nil {
		return err
	}
	if aq.csv {
		return writeAccountingCSV(c, rep)
	}
	u := currentUser(c)
	v := templates.Accounting{From: rep.From, To: rep.To, By: rep.By, Period: rep.Period, Team: aq.team, User: aq.user,
		Scope: rep.Scope, IdleBelowPct: fmt.Sprintf("%g", rep.IdleBelowPct), States: outcomeStates(rep.Rows),
		CanByTeam: u.Role != models.RoleResearcher, CanPickTeam: u.Role == models.RoleAdmin,
		CanPickUser: u.Role != models.RoleResearcher}
	q := c.QueryParams()
	csvQ := url.Values{}
	for k, vs := range q {
		csvQ[k] = vs
	}
	csvQ.Set("format", "csv")
	for _, k := range []string{"from", "to", "by", "period"} {
		if csvQ.Get(k) == "" {
			csvQ.Set(k, map[string]string{"from": rep.From, "to": rep.To, "by": rep.By, "period": rep.Period}[k])
		}
	}
	v.CSVURL = "/accounting?" + csvQ.Encode()
	v.APIURL = "/api/v1/accounting?" + csvQ.Encode()
	for _, r := range rep.Rows {
		v.Rows = append(v.Rows, accountingView(r, v.States))
	}
	if len(rep.Periods) > 1 {
		for _, r := range rep.Periods {
			v.Periods = append(v.Periods, accountingView(r, v.States))
		}
	}
	v.Total = accountingView(rep.Total, v.States)
	return s.render(c, http.StatusOK, templates.AccountingPage(page(c, "Accounting", "accounting"), v))
}

func accountingView(r api.AccountingRow, states []string) templates.AccountingRow {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
	out := templates.AccountingRow{Period: r.Period, Team: r.Team, User: r.User,
		Allocated: f(r.AllocatedGPUHours), Used: f(r.UsedGPUHours), Idle: f(r.IdleGPUHours),
		IdleAllocated: f(r.IdleAllocatedGPUHours), Unsampled: f(r.UnsampledGPUHours),
		Preempted: r.PreemptedRuns, Requeued: r.RequeuedRuns, Started: r.JobsStarted,
		Reclaimed:  f(r.ReclaimedGPUHours),
		WaitMedian: fmtWait(r.QueueWaitMedianS), WaitP95: fmtWait(r.QueueWaitP95S)}
	if r.AllocatedGPUHours > 0 {
		out.UsedPct = fmt.Sprintf("%.0f%%", 100*r.UsedGPUHours/r.AllocatedGPUHours)
	}
	for _, s := range states {
		out.Jobs = append(out.Jobs, r.Jobs[s])
	}
	return out
}

// fmtWait writes a queue wait in seconds briefly: 45s, 12m, 3.5h.
func fmtWait(s float64) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%.0fs", s)
	case s < 3600:
		return fmt.Sprintf("%.0fm", s/60)
	}
	return fmt.Sprintf("%.1fh", s/3600)
}
