package web

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/templates"
)

// teamWindow is how far back a team's page looks.
const teamWindow = 7 * 24 * time.Hour

func (s *Server) apiTeams(c echo.Context) error {
	m, err := s.app.Moment(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m.TeamShares())
}

// team returns the team named by :name for a member of it or an admin
// (app.App.TeamMembers), as of m: its members' usage counts their runs
// in progress too.
func (s *Server) team(c echo.Context, m *app.Moment) (api.Team, error) {
	name := c.Param("name")
	since := m.Now.Add(-teamWindow)
	out, err := s.app.TeamMembers(c.Request().Context(), appActor(c), name, since)
	if err != nil {
		return out, err
	}
	t, ok := m.Team(name)
	if !ok {
		return api.Team{}, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no team %q", name))
	}
	out.TeamShare, out.Window = m.TeamShare(t), teamWindow.Seconds()
	// The store sums the service of ended runs; add the runs in progress.
	usage := map[string]float64{}
	running := m.Running()
	for k := range running {
		j := &running[k]
		if j.Team == name && !j.SubmittedAt.Before(since) {
			usage[j.User] += j.Service(m.Now).GPUSeconds - j.AttainedService
		}
	}
	for k := range out.Members {
		out.Members[k].UsageGPUSeconds += usage[out.Members[k].User]
	}
	sort.Slice(out.Members, func(a, b int) bool { return out.Members[a].UsageGPUSeconds > out.Members[b].UsageGPUSeconds })
	return out, nil
}

func (s *Server) apiTeam(c echo.Context) error {
	m, err := s.app.Moment(c.Request().Context())
	if err != nil {
		return err
	}
	t, err := s.team(c, m)
	if err != nil {
		return err
	}
	u := currentUser(c)
	f, err := s.teamFlags(c.Request().Context(), m, u, t.Name)
	if err != nil {
		return err
	}
	for _, r := range f.Idle {
		t.Warnings = append(t.Warnings, fmt.Sprintf("job %d holds GPUs idle %s", r.ID, r.Text))
	}
	for _, r := range f.Stranded {
		t.Warnings = append(t.Warnings, fmt.Sprintf("job %d cannot start: %s", r.ID, r.Why))
	}
	if w := guaranteeWarning(m.TeamShares(), s.app.ClusterGPUs()); w != "" && app.IsAdmin(u) {
		t.Warnings = append(t.Warnings, w)
	}
	return c.JSON(http.StatusOK, t)
}

func (s *Server) apiSetShare(c echo.Context) error {
	var in api.TeamShareUpdate
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.app.SetTeamShare(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return err
	}
	return s.apiTeam(c)
}

func (s *Server) apiSetCap(c echo.Context) error {
	var in api.UserCap
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.app.SetUserCap(c.Request().Context(), appActor(c), c.Param("name"), c.Param("user"), in); err != nil {
		return err
	}
	return s.apiTeam(c)
}

func formInt(c echo.Context, field string) (*int, error) {
	v := c.FormValue(field)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, badRequest("%s: must be a whole number", field)
	}
	return &n, nil
}

func (s *Server) teamsPage(c echo.Context) error {
	m, err := s.app.Moment(c.Request().Context())
	if err != nil {
		return err
	}
	var rows []templates.TeamShareRow
	for _, t := range m.TeamShares() {
		rows = append(rows, shareRow(t))
	}
	p := page(c, "Teams", "teams")
	p.Warning = guaranteeWarning(m.TeamShares(), s.app.ClusterGPUs())
	return s.render(c, http.StatusOK, templates.TeamsPage(p, rows))
}

func shareRow(t api.TeamShare) templates.TeamShareRow {
	return templates.TeamShareRow{
		Name: t.Name, Guarantee: t.GuaranteeGPUs, InUse: fmtGPUs(t.InUseGPUs), Borrowed: fmtGPUs(t.BorrowedGPUs),
		Weight: strconv.FormatFloat(t.Weight, 'g', 4, 64), Usage: fmt.Sprintf("%.0f", t.UsageGPUSeconds),
		Entitlement: fmt.Sprintf("%.3f", t.Entitlement), UsageShare: fmt.Sprintf("%.3f", t.UsageShare),
		Factor: fmt.Sprintf("%.3f", t.Factor), MaxPerUser: t.MaxGPUsPerUser,
		DefaultTimeLimit: fmtTimeLimit(t.DefaultTimeLimitS), MaxTimeLimit: fmtTimeLimit(t.MaxTimeLimitS),
	}
}

// fmtTimeLimit writes a time limit of s seconds; "" for none.
func fmtTimeLimit(s int64) string {
	if s <= 0 {
		return ""
	}
	return job.FormatTimeLimit(time.Duration(s) * time.Second)
}

func (s *Server) apiSetTimeLimits(c echo.Context) error {
	var in api.TimeLimits
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.app.SetTimeLimits(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return err
	}
	return s.apiTeam(c)
}

// apiSetIdlePolicy sets a team's idle-GPU reclaim policy, for its lead
// or an admin: PUT /api/v1/teams/{name}/idle-policy with api.IdlePolicy.
func (s *Server) apiSetIdlePolicy(c echo.Context) error {
	var in api.IdlePolicy
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.app.SetIdlePolicy(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return err
	}
	return s.apiTeam(c)
}

// apiSetSessionPolicy sets a team's session policy, for its lead or an
// admin: PUT /api/v1/teams/{name}/session-policy with api.SessionPolicy.
func (s *Server) apiSetSessionPolicy(c echo.Context) error {
	var in api.SessionPolicy
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.app.SetSessionPolicy(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return err
	}
	return s.apiTeam(c)
}

// apiSetBatchPolicy sets which batch priorities a team allows, for an
// admin: PUT /api/v1/teams/{name}/batch-policy with api.BatchPolicy.
func (s *Server) apiSetBatchPolicy(c echo.Context) error {
	var in api.BatchPolicy
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.app.SetBatchPolicy(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return err
	}
	return s.apiTeam(c)
}

// batchPolicyForm is the team page's batch-priority form: checkboxes
// priorities (high, normal, low) and high_gpus (empty: 0).
func (s *Server) batchPolicyForm(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return s.teamFormError(c, badRequest("the form: %v", err))
	}
	in := api.BatchPolicy{Priorities: form["priorities"]}
	if v := strings.TrimSpace(c.FormValue("high_gpus")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return s.teamFormError(c, badRequest("high_gpus: %q is not a whole number of GPUs", v))
		}
		in.HighGPUs = n
	}
	if err := s.app.SetBatchPolicy(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Batch priorities saved.")
}

// sessionPolicyForm is the team page's session policy form: sessions
// (allowed or off; absent: allowed), max_gpus, max_session_hours and
// priority_gpus (empty: 0).
func (s *Server) sessionPolicyForm(c echo.Context) error {
	var in api.SessionPolicy
	switch v := c.FormValue("sessions"); v {
	case "", "allowed":
	case "off":
		in.Allowed = new(false)
	default:
		return s.teamFormError(c, badRequest("sessions: %q: want allowed or off", v))
	}
	if v := strings.TrimSpace(c.FormValue("max_gpus")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return s.teamFormError(c, badRequest("max_gpus: %q is not a whole number of GPUs", v))
		}
		in.MaxGPUs = n
	}
	if v := strings.TrimSpace(c.FormValue("max_session_hours")); v != "" {
		h, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s.teamFormError(c, badRequest("max_session_hours: %q is not a number of hours", v))
		}
		in.MaxSessionHours = h
	}
	if v := strings.TrimSpace(c.FormValue("priority_gpus")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return s.teamFormError(c, badRequest("priority_gpus: %q is not a whole number of GPUs", v))
		}
		in.PriorityGPUs = n
	}
	if err := s.app.SetSessionPolicy(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Session policy saved.")
}

// idlePolicyForm is the team page's idle-GPU policy form: the team's own
// rule, idle_below_pct (a percentage) and idle_after (a duration such as
// 45m; empty, both: the server's), checkboxes reclaim_sessions and
// reclaim_batch, and max_keep_alive_hours (empty: the default).
func (s *Server) idlePolicyForm(c echo.Context) error {
	in := api.IdlePolicy{ReclaimSessions: c.FormValue("reclaim_sessions") != "", ReclaimBatch: c.FormValue("reclaim_batch") != ""}
	if v := strings.TrimSpace(c.FormValue("max_keep_alive_hours")); v != "" {
		h, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s.teamFormError(c, badRequest("max_keep_alive_hours: %q is not a number of hours", v))
		}
		in.MaxKeepAliveHours = h
	}
	if v := strings.TrimSpace(c.FormValue("idle_below_pct")); v != "" {
		pct, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil {
			return s.teamFormError(c, badRequest("idle_below_pct: %q is not a percentage", v))
		}
		in.IdleBelowPct = &pct
	}
	if v := strings.TrimSpace(c.FormValue("idle_after")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return s.teamFormError(c, badRequest("idle_after: %q is not a duration such as 45m or 2h", v))
		}
		if err := idle.CheckAfter(d); err != nil {
			return s.teamFormError(c, badRequest("idle_after: %s (empty: the server's, %s)", err, app.ShortDuration(s.app.DefaultIdleTerms().Rule.After)))
		}
		secs := d.Round(time.Second).Seconds()
		in.IdleAfterS = &secs
	}
	if err := s.app.SetIdlePolicy(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Idle GPU policy saved.")
}

func (s *Server) timeLimitsForm(c echo.Context) error {
	in := api.TimeLimits{Default: c.FormValue("default_time_limit"), Max: c.FormValue("max_time_limit")}
	if err := s.app.SetTimeLimits(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Time limits saved.")
}

func (s *Server) teamPage(c echo.Context) error {
	return s.renderTeam(c, http.StatusOK, "", "")
}

func (s *Server) renderTeam(c echo.Context, status int, flash, notice string) error {
	m, err := s.app.Moment(c.Request().Context())
	if err != nil {
		return err
	}
	t, err := s.team(c, m)
	if err != nil {
		return err
	}
	u := currentUser(c)
	v := templates.Team{Share: shareRow(t.TeamShare),
		CanEditShare: app.IsAdmin(u),
		CanEditCaps:  app.CanLead(u, t.Name)}
	v.ShowShares = v.CanEditCaps
	if mt, ok := m.Team(t.Name); ok {
		v.Idle = s.teamIdle(&mt)
	}
	v.Sessions = templates.TeamSessions{MaxHours: strconv.FormatFloat(t.SessionPolicy.MaxSessionHours, 'g', -1, 64),
		PriorityGPUs: t.SessionPolicy.PriorityGPUs, Off: !t.SessionPolicy.SessionsAllowed(), MaxGPUs: t.SessionPolicy.MaxGPUs}
	v.Batch = templates.TeamBatch{Priorities: t.BatchPolicy.Priorities, HighGPUs: t.BatchPolicy.HighGPUs}
	shares := s.app.MemberShares(appActor(c), t.Name)
	for _, m := range t.Members {
		row := templates.MemberRow{User: m.User, Role: m.Role,
			Usage: fmt.Sprintf("%.0f", m.UsageGPUSeconds), MaxGPUs: m.MaxGPUs}
		if v.ShowShares {
			row.Decayed, row.Split, row.UsageShare, row.Factor = "0", "—", "0%", "1.00"
			if us, ok := shares[m.User]; ok {
				row.Decayed = fmt.Sprintf("%.0f", us.UsageGPUSeconds)
				row.Split = fmt.Sprintf("%.1f", us.ShareGPUs)
				row.UsageShare = fmt.Sprintf("%.0f%%", 100*us.UsageShare)
				row.Factor = fmt.Sprintf("%.2f", us.Factor)
			}
		}
		v.Members = append(v.Members, row)
	}
	for _, sm := range t.Samples {
		v.Samples = append(v.Samples, [4]float64{float64(sm.At.Unix()), sm.InUseGPUs, sm.BorrowedGPUs, float64(sm.GuaranteeGPUs)})
	}
	// The chart ends now, with the figures the card shows.
	v.Samples = append(v.Samples, [4]float64{float64(m.Now.Unix()), t.InUseGPUs, t.BorrowedGPUs, float64(t.GuaranteeGPUs)})
	v.SamplesAsOf = m.Now.Local().Format("15:04:05")
	tt, err := s.teamTopic(c.Request().Context(), m, currentUser(c), t.Name)
	if err != nil {
		return err
	}
	for _, j := range tt.Queue {
		v.Queue = append(v.Queue, templates.TeamQueueRow{ID: j.ID, Name: j.Name, User: j.User, State: string(j.State),
			Priority: templates.PriorityClass(j.Priority), GPUs: j.GPUs, Queue: j.Queue, Attained: fmt.Sprintf("%.0f", j.AttainedService)})
	}
	v.QueueTotal = tt.QueueTotal
	if v.Flags, err = s.teamFlags(c.Request().Context(), m, u, t.Name); err != nil {
		return err
	}
	p := page(c, "Team "+t.Name, "teams")
	p.Charts, p.Flash, p.Notice = true, flash, notice
	if app.IsAdmin(u) {
		p.Warning = guaranteeWarning(m.TeamShares(), s.app.ClusterGPUs())
	}
	return s.render(c, status, templates.TeamPage(p, v))
}

// teamIdle is team t's idle policy as its page shows it: its own rule's
// fields (empty where it has none) with the server's as placeholders, and
// in a sentence the rule in force and the server's grace.
func (s *Server) teamIdle(t *app.Team) templates.TeamIdle {
	terms, def := s.app.TeamIdleTerms(t), s.app.DefaultIdleTerms().Rule
	p := app.IdlePolicyOf(t)
	out := templates.TeamIdle{ReclaimSessions: p.ReclaimSessions, ReclaimBatch: p.ReclaimBatch,
		MaxKeepAliveHours: strconv.FormatFloat(p.MaxKeepAliveHours, 'g', -1, 64),
		DefaultBelowPct:   strconv.FormatFloat(def.BelowPct, 'g', -1, 64), DefaultAfter: "none"}
	if def.After > 0 {
		out.DefaultAfter = app.ShortDuration(def.After)
	}
	if t.IdleBelowPct > 0 {
		out.BelowPct = strconv.FormatFloat(t.IdleBelowPct, 'g', -1, 64)
	}
	if t.IdleAfterS > 0 {
		out.After = app.ShortDuration(time.Duration(t.IdleAfterS) * time.Second)
	}
	out.InForce = fmt.Sprintf("under %g%% for %s", terms.Rule.BelowPct, app.ShortDuration(terms.Rule.After))
	switch {
	case !terms.Rule.Valid():
		out.InForce = "never (no idle time set)"
	case t.IdleBelowPct == 0 && t.IdleAfterS == 0:
		out.InForce += " (the server's)"
	}
	if !terms.Rule.Valid() {
		out.Rule = "No job of this team is flagged idle: this server sets no idle time (serve --idle-after 0) and the team none of its own."
		return out
	}
	out.Rule = fmt.Sprintf("A running job of this team is idle when all its GPUs are under %g%% utilization for %s; ", terms.Rule.BelowPct, app.ShortDuration(terms.Rule.After))
	if grace := s.app.ReclaimGrace(); grace > 0 {
		out.Rule += fmt.Sprintf("where this policy says so, it is warned, then stopped %s later (server settings).", app.ShortDuration(grace))
	} else {
		out.Rule += "it is flagged, never stopped: this server reclaims nothing (serve --idle-reclaim-grace 0)."
	}
	return out
}

// teamFormError shows a bad form value on the team page; other errors pass.
func (s *Server) teamFormError(c echo.Context, err error) error {
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusBadRequest {
		return s.renderTeam(c, http.StatusBadRequest, he.Message.(string), "")
	}
	var ae *app.Error
	if errors.As(err, &ae) && ae.Kind == app.Invalid {
		return s.renderTeam(c, http.StatusBadRequest, ae.Msg, "")
	}
	return err
}

func (s *Server) shareForm(c echo.Context) error {
	var in api.TeamShareUpdate
	var err error
	if in.GuaranteeGPUs, err = formInt(c, "guaranteed_gpus"); err != nil {
		return s.teamFormError(c, err)
	}
	if in.MaxGPUsPerUser, err = formInt(c, "max_gpus_per_user"); err != nil {
		return s.teamFormError(c, err)
	}
	if v := c.FormValue("weight"); v != "" {
		w, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s.teamFormError(c, badRequest("weight: must be a number"))
		}
		in.Weight = &w
	}
	if err := s.app.SetTeamShare(c.Request().Context(), appActor(c), c.Param("name"), in); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Share saved.")
}

func (s *Server) capForm(c echo.Context) error {
	limit, err := formInt(c, "max_gpus")
	if err != nil {
		return s.teamFormError(c, err)
	}
	if err := s.app.SetUserCap(c.Request().Context(), appActor(c), c.Param("name"), c.FormValue("user"), api.UserCap{MaxGPUs: limit}); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Cap saved.")
}
