package web

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/accounting"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/templates"
)

// DefaultIdleBelowPct is the GPU utilization, in percent, under which an
// allocated GPU counts idle in accounting, unless Config says otherwise.
const DefaultIdleBelowPct = accounting.DefaultIdleBelowPct

// accountingReport computes the report the request asks for, as the
// asker may see it (app.App.Accounting); csv: the request asks for CSV
// (format=csv), else JSON or the page. Errors are 400s and 403s naming
// the parameter.
func (s *Server) accountingReport(c echo.Context) (rep api.Accounting, csv bool, err error) {
	q := c.QueryParams()
	switch q.Get("format") {
	case "", "json", "html":
	case "csv":
		csv = true
	default:
		return rep, false, badRequest("format: %q is not json or csv", q.Get("format"))
	}
	rep, err = s.app.Accounting(c.Request().Context(), appActor(c), accountingQuery(q), s.idleBelowPct())
	return rep, csv, err
}

// accountingQuery reads from, to, by, period, team and user.
func accountingQuery(q url.Values) api.AccountingQuery {
	return api.AccountingQuery{From: q.Get("from"), To: q.Get("to"), By: q.Get("by"), Period: q.Get("period"),
		Team: q.Get("team"), User: q.Get("user")}
}

func (s *Server) idleBelowPct() float64 {
	if s.cfg.AccountingIdleBelowPct > 0 {
		return s.cfg.AccountingIdleBelowPct
	}
	return DefaultIdleBelowPct
}

// apiAccounting answers GET /api/v1/accounting, as JSON or, with
// format=csv, as CSV.
func (s *Server) apiAccounting(c echo.Context) error {
	rep, csv, err := s.accountingReport(c)
	if err != nil {
		return err
	}
	if csv {
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
	rep, csv, err := s.accountingReport(c)
	if err != nil {
		return err
	}
	if csv {
		return writeAccountingCSV(c, rep)
	}
	q := c.QueryParams()
	rights := app.AccountingRightsOf(appActor(c))
	v := templates.Accounting{From: rep.From, To: rep.To, By: rep.By, Period: rep.Period, Team: q.Get("team"), User: q.Get("user"),
		Scope: rep.Scope, IdleBelowPct: fmt.Sprintf("%g", rep.IdleBelowPct), States: outcomeStates(rep.Rows),
		CanByTeam: rights.ByTeam, CanPickTeam: rights.PickTeam, CanPickUser: rights.PickUser}
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
