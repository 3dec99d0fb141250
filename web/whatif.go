package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/whatif"
	"github.com/gpuportal/gpuportal/templates"
)

// What-if on the cluster's own history (app.App.WhatIf): the admin page
// /admin/whatif and GET /api/v1/whatif, one replay at a time.

// whatIfCDFPoints is how many JCTs the CDF chart samples.
const whatIfCDFPoints = 80

// readWhatIf reads a replay's input from the form (the page) or the
// query (the API) over def (app.ParseWhatIf).
func readWhatIf(c echo.Context, def app.WhatIfInput) (app.WhatIfInput, error) {
	params, err := c.FormParams()
	if err != nil {
		return def, badRequest("form: %v", err)
	}
	return app.ParseWhatIf(params, def)
}

// errWhatIfBusy says another replay runs.
var errWhatIfBusy = echo.NewHTTPError(http.StatusServiceUnavailable, "another what-if replay is running; try again when it ends")

// whatIf runs a replay for the current user (app.App.WhatIf), unless
// another one runs.
func (s *Server) whatIf(c echo.Context, in app.WhatIfInput) (*whatif.Report, error) {
	select {
	case s.whatIfSlot <- struct{}{}:
		defer func() { <-s.whatIfSlot }()
	default:
		return nil, errWhatIfBusy
	}
	return s.app.WhatIf(c.Request().Context(), appActor(c), in)
}

// apiWhatIf is GET /api/v1/whatif: a replay's report as JSON (admins).
func (s *Server) apiWhatIf(c echo.Context) error {
	in, err := readWhatIf(c, s.app.DefaultWhatIf())
	if err != nil {
		return err
	}
	rep, err := s.whatIf(c, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

// whatIfPage is GET /admin/whatif: the form, with the live scheduler's
// policy and knobs; nothing runs until it is sent.
func (s *Server) whatIfPage(c echo.Context) error {
	return s.renderWhatIf(c, http.StatusOK, s.app.DefaultWhatIf(), nil, "")
}

// whatIfForm is POST /admin/whatif: run the replay and show it.
func (s *Server) whatIfForm(c echo.Context) error {
	def := s.app.DefaultWhatIf()
	def.Policies = nil // an unticked form asks for none
	in, err := readWhatIf(c, def)
	var rep *whatif.Report
	if err == nil {
		rep, err = s.whatIf(c, in)
	}
	var he *echo.HTTPError
	var ae *app.Error
	switch {
	case errors.As(err, &ae):
		return s.renderWhatIf(c, appStatus(ae.Kind), in, nil, ae.Msg)
	case errors.As(err, &he) && he.Code >= 400 && he.Code < 600 && he.Code != http.StatusInternalServerError:
		msg, _ := he.Message.(string)
		return s.renderWhatIf(c, he.Code, in, nil, msg)
	}
	if err != nil {
		return err
	}
	return s.renderWhatIf(c, http.StatusOK, in, rep, "")
}

func (s *Server) renderWhatIf(c echo.Context, status int, in app.WhatIfInput, rep *whatif.Report, flash string) error {
	p := page(c, "What-if", "admin")
	p.Flash = flash
	p.Charts = rep != nil
	return s.render(c, status, templates.WhatIfPage(p, whatIfView(in, rep)))
}

// whatIfView is the page's view of a replay's input and report.
func whatIfView(in app.WhatIfInput, rep *whatif.Report) templates.WhatIf {
	v := templates.WhatIf{Days: strconv.Itoa(in.Days), Thresholds: joinFloats(in.Thresholds),
		MinRuntimeS: strconv.FormatFloat(in.MinRuntimeS, 'f', -1, 64), HalfLife: halfLifeText(in.HalfLifeS),
		Salus: in.Salus(), MaxJobs: app.MaxWhatIfJobs, MaxDays: app.MaxWhatIfDays}
	for _, name := range app.WhatIfPolicies() {
		v.Policies = append(v.Policies, templates.WhatIfPolicy{Name: name, Checked: slices.Contains(in.Policies, name)})
	}
	if rep == nil {
		return v
	}
	r := &templates.WhatIfReport{Teams: rep.TeamNames(),
		Summary: fmt.Sprintf("%s finished in the last %s (submitted %s to %s), replayed on %s of %s",
			count(rep.Jobs, "job", "jobs"), count(in.Days, "day", "days"), rep.From.Local().Format(timeLayout),
			rep.To.Local().Format(timeLayout), count(rep.Nodes, "node", "nodes"), count(rep.GPUs, "GPU", "GPUs"))}
	if rep.Capped {
		r.Summary += fmt.Sprintf("; only the %d most recently finished were read", app.MaxWhatIfJobs)
	}
	if rep.TooLarge > 0 {
		r.Summary += fmt.Sprintf("; %d jobs asked for more GPUs than the cluster has and were left out", rep.TooLarge)
	}
	for _, row := range rep.Rows {
		tr := templates.WhatIfRow{Name: row.Name, Actual: row.Actual, Jobs: row.Jobs, Finished: row.Finished,
			AvgJCT: fmtDuration(secs(row.AvgJCTS)), P95JCT: fmtDuration(secs(row.P95JCTS)),
			AvgPending: fmtDuration(secs(row.AvgPendingS)), Util: fmt.Sprintf("%.0f%%", 100*row.GPUUtilization),
			Preemptions: row.Preemptions}
		for _, t := range r.Teams {
			if v, ok := row.TeamAvgJCT(t); ok {
				tr.TeamJCT = append(tr.TeamJCT, fmtDuration(secs(v)))
			} else {
				tr.TeamJCT = append(tr.TeamJCT, "–")
			}
		}
		r.Rows = append(r.Rows, tr)
		r.CDF.Labels = append(r.CDF.Labels, row.Name)
	}
	r.CDF.X, r.CDF.Y = rep.CDF(whatIfCDFPoints)
	v.Report = r
	return v
}

// count writes n with its noun: "1 day", "3 days".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func joinFloats(v []float64) string {
	parts := make([]string, len(v))
	for i, f := range v {
		parts[i] = strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strings.Join(parts, ",")
}

// halfLifeText writes a half-life as the form reads it: whole days as
// "7d", else seconds; "0" for no decay.
func halfLifeText(s float64) string {
	if s <= 0 {
		return "0"
	}
	if d := s / 86400; d == math.Trunc(d) {
		return strconv.FormatFloat(d, 'f', -1, 64) + "d"
	}
	return strconv.FormatFloat(s, 'f', -1, 64)
}
