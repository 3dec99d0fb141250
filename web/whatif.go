package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/salussim"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/core/whatif"
	"github.com/gpuportal/gpuportal/templates"
)

// What-if on the cluster's own history (docs/simulator.md): the admin
// page /admin/whatif and GET /api/v1/whatif replay the jobs finished in
// the last days under other policies and knobs (core/whatif), beside
// what actually happened. A replay is bounded: at most maxWhatIfJobs
// jobs, whatIfTimeout of work, one replay at a time.
const (
	maxWhatIfDays = 90
	maxWhatIfJobs = 5000
	// maxWhatIfThresholds bounds the queue limits of a replay (queues
	// less one).
	maxWhatIfThresholds = 16
	whatIfTimeout       = 30 * time.Second
	// whatIfCDFPoints is how many JCTs the CDF chart samples.
	whatIfCDFPoints = 80
)

// whatIfInput is what a replay is asked for, checked.
type whatIfInput struct {
	Days       int
	Policies   []string
	Thresholds []float64 // nil: the scheduler's defaults
	// MinRuntimeS is the minimum runtime before a reclaim; 0: none.
	MinRuntimeS float64
	// HalfLifeS is the usage half-life; 0: no decay.
	HalfLifeS float64
	Sharing   salussim.Sharing
}

// defaultWhatIf is the form's first state: the live scheduler's policy
// and knobs, beside the policies an admin would most likely compare.
func (s *Server) defaultWhatIf() whatIfInput {
	cfg := s.cfg.Engine.Scheduler().Config()
	in := whatIfInput{Days: 7, Thresholds: cfg.Thresholds, MinRuntimeS: max(cfg.MinRuntimeS, 0), HalfLifeS: max(s.cfg.Engine.HalfLifeS(), 0)}
	live := sim.CandidateLabel(cfg.Policy, s.cfg.Engine.Scheduler().Rule())
	in.Policies = []string{live}
	for _, p := range []string{"fifo", "tiresias-l", "tiresias-g"} {
		if !slices.Contains(in.Policies, p) {
			in.Policies = append(in.Policies, p)
		}
	}
	return in
}

// readWhatIf reads a replay's input from the form (the page) or the
// query (the API): days, policy (repeated or comma-separated),
// thresholds, min_runtime_s, half_life and sharing; a bad field is a 400
// naming it.
func readWhatIf(c echo.Context, def whatIfInput) (whatIfInput, error) {
	in := def
	params, err := c.FormParams()
	if err != nil {
		return in, badRequest("form: %v", err)
	}
	if v := params.Get("days"); v != "" {
		d, err := strconv.Atoi(v)
		if err != nil || d < 1 || d > maxWhatIfDays {
			return in, badRequest("days: must be a whole number of days from 1 to %d", maxWhatIfDays)
		}
		in.Days = d
	}
	if ps, ok := params["policy"]; ok {
		names, err := sim.ParseCandidates(strings.Join(ps, ","))
		if err != nil {
			return in, badRequest("policy: %v", err)
		}
		if len(names) > len(sched.Policies())+4 {
			return in, badRequest("policy: at most %d policies at once", len(sched.Policies())+4)
		}
		in.Policies = names
	}
	if _, ok := params["thresholds"]; ok {
		v := params.Get("thresholds")
		if n := strings.Count(v, ",") + 1; n > maxWhatIfThresholds {
			return in, badRequest("thresholds: %d limits: at most %d", n, maxWhatIfThresholds)
		}
		thr, err := sim.ParseThresholds(v)
		if err != nil {
			return in, badRequest("thresholds: %v", err)
		}
		in.Thresholds = thr
	}
	if v := params.Get("min_runtime_s"); v != "" {
		m, err := strconv.ParseFloat(v, 64)
		if err != nil || !(m >= 0) || m > 30*24*3600 {
			return in, badRequest("min_runtime_s: must be seconds from 0 (none) to 2592000")
		}
		in.MinRuntimeS = m
	}
	if v := params.Get("half_life"); v != "" {
		h, err := trace.ParseDuration(v)
		if err != nil || h > 3660*24*3600 {
			return in, badRequest("half_life: must be a duration such as 7d, 168h or 3600 (seconds), 0 for no decay")
		}
		in.HalfLifeS = h
	}
	if v := params.Get("sharing"); v != "" {
		sh, err := salussim.ParseSharing(v)
		if err != nil {
			return in, badRequest("sharing: %v", err)
		}
		in.Sharing = sh
	}
	return in, nil
}

// errWhatIfBusy says another replay runs.
var errWhatIfBusy = echo.NewHTTPError(http.StatusServiceUnavailable, "another what-if replay is running; try again when it ends")

// whatIf runs a replay: the jobs finished in the last in.Days, on the
// GPUs the store saw in that window, with the store's teams.
func (s *Server) whatIf(ctx context.Context, in whatIfInput) (*whatif.Report, error) {
	select {
	case s.whatIfSlot <- struct{}{}:
		defer func() { <-s.whatIfSlot }()
	default:
		return nil, errWhatIfBusy
	}
	ctx, cancel := context.WithTimeout(ctx, whatIfTimeout)
	defer cancel()
	since := s.cfg.Now().Add(-time.Duration(in.Days) * 24 * time.Hour)
	recs, err := app.WhatIfHistory(ctx, s.cfg.Store, since, maxWhatIfJobs)
	if err != nil {
		return nil, err
	}
	gpus, err := app.GPUsSeen(ctx, s.cfg.Store, since)
	if err != nil {
		return nil, err
	}
	teams, err := app.WhatIfTeams(ctx, s.cfg.Store)
	if err != nil {
		return nil, err
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
		return nil, echo.NewHTTPError(http.StatusUnprocessableEntity, "days: no GPU was seen in the window, so there is no cluster to replay on")
	}
	rep, err := whatif.Compare(ctx, recs, whatif.Config{Candidates: in.Policies, Sim: cfg})
	switch {
	case errors.Is(err, whatif.ErrNoJobs):
		return nil, echo.NewHTTPError(http.StatusUnprocessableEntity, fmt.Sprintf("days: no job finished in the last %d days", in.Days))
	case errors.Is(err, context.DeadlineExceeded):
		return nil, echo.NewHTTPError(http.StatusServiceUnavailable, fmt.Sprintf("the replay took longer than %v: ask for fewer days or policies", whatIfTimeout))
	case err != nil:
		return nil, err
	}
	if len(recs) == maxWhatIfJobs {
		rep.Capped = true
	}
	return rep, nil
}

// apiWhatIf is GET /api/v1/whatif: a replay's report as JSON (admins).
func (s *Server) apiWhatIf(c echo.Context) error {
	in, err := readWhatIf(c, s.defaultWhatIf())
	if err != nil {
		return err
	}
	rep, err := s.whatIf(c.Request().Context(), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

// whatIfPage is GET /admin/whatif: the form, with the live scheduler's
// policy and knobs; nothing runs until it is sent.
func (s *Server) whatIfPage(c echo.Context) error {
	return s.renderWhatIf(c, http.StatusOK, s.defaultWhatIf(), nil, "")
}

// whatIfForm is POST /admin/whatif: run the replay and show it.
func (s *Server) whatIfForm(c echo.Context) error {
	def := s.defaultWhatIf()
	def.Policies = nil // an unticked form asks for none
	in, err := readWhatIf(c, def)
	if err == nil && len(in.Policies) == 0 {
		err = badRequest("policy: tick at least one policy")
	}
	var rep *whatif.Report
	if err == nil {
		rep, err = s.whatIf(c.Request().Context(), in)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code >= 400 && he.Code < 600 && he.Code != http.StatusInternalServerError {
		msg, _ := he.Message.(string)
		return s.renderWhatIf(c, he.Code, in, nil, msg)
	}
	if err != nil {
		return err
	}
	return s.renderWhatIf(c, http.StatusOK, in, rep, "")
}

func (s *Server) renderWhatIf(c echo.Context, status int, in whatIfInput, rep *whatif.Report, flash string) error {
	p := page(c, "What-if", "admin")
	p.Flash = flash
	p.Charts = rep != nil
	return s.render(c, status, templates.WhatIfPage(p, whatIfView(in, rep)))
}

// whatIfView is the page's view of a replay's input and report.
func whatIfView(in whatIfInput, rep *whatif.Report) templates.WhatIf {
	v := templates.WhatIf{Days: strconv.Itoa(in.Days), Thresholds: joinFloats(in.Thresholds),
		MinRuntimeS: strconv.FormatFloat(in.MinRuntimeS, 'f', -1, 64), HalfLife: halfLifeText(in.HalfLifeS),
		Salus: in.Sharing == salussim.SharingSalus, MaxJobs: maxWhatIfJobs, MaxDays: maxWhatIfDays}
	for _, p := range sched.Policies() {
		cands := []string{p}
		for _, r := range sched.PolicyRules(p)[min(1, len(sched.PolicyRules(p))):] {
			cands = append(cands, p+":"+r)
		}
		for _, name := range cands {
			v.Policies = append(v.Policies, templates.WhatIfPolicy{Name: name, Checked: slices.Contains(in.Policies, name)})
		}
	}
	if rep == nil {
		return v
	}
	r := &templates.WhatIfReport{Teams: rep.TeamNames(),
		Summary: fmt.Sprintf("%s finished in the last %s (submitted %s to %s), replayed on %s of %s",
			count(rep.Jobs, "job", "jobs"), count(in.Days, "day", "days"), rep.From.Local().Format(timeLayout),
			rep.To.Local().Format(timeLayout), count(rep.Nodes, "node", "nodes"), count(rep.GPUs, "GPU", "GPUs"))}
	if rep.Capped {
		r.Summary += fmt.Sprintf("; only the %d most recently finished were read", maxWhatIfJobs)
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
