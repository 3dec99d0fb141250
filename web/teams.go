package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// teamWindow is how far back a team's page looks.
const teamWindow = 7 * 24 * time.Hour

// The bounds of a team's weight, its share among borrowers.
const (
	minTeamWeight = 0.001
	maxTeamWeight = 1e6
)

func (s *Server) apiTeams(c echo.Context) error {
	m, err := s.moment(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m.teamShares())
}

// team returns the team named by :name for a member of it or an admin,
// as of m.
func (s *Server) team(c echo.Context, m *moment) (api.Team, error) {
	name := c.Param("name")
	ctx := c.Request().Context()
	i := slices.IndexFunc(m.teams, func(t models.Team) bool { return t.Name == name })
	if i < 0 {
		return api.Team{}, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no team %q", name))
	}
	if !canSee(currentUser(c), name) {
		return api.Team{}, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("only members of %s and admins may see its page", name))
	}
	out := api.Team{TeamShare: m.teamShare(m.teams[i]), Window: teamWindow.Seconds(), Members: []api.Member{}, Samples: []api.TeamSample{}}
	caps, err := s.cfg.Store.UserCaps(ctx)
	if err != nil {
		return out, err
	}
	out.Caps = caps[name]
	if out.Caps == nil {
		out.Caps = map[string]int{}
	}
	since := m.now.Add(-teamWindow)
	usage, err := s.cfg.Store.MemberUsage(ctx, name, since)
	if err != nil {
		return out, err
	}
	// The store sums the service of ended runs; add the runs in progress.
	for k := range m.unfinished {
		j := &m.unfinished[k]
		if j.Team == name && !j.SubmittedAt.Before(since) {
			usage[j.User] += j.Service(m.now).GPUSeconds - j.AttainedService
		}
	}
	users, err := s.cfg.Store.Users(ctx)
	if err != nil {
		return out, err
	}
	for _, u := range users {
		if u.Team == name {
			out.Members = append(out.Members, api.Member{User: u.Name, Role: string(u.Role), UsageGPUSeconds: usage[u.Name], MaxGPUs: out.Caps[u.Name]})
		}
	}
	sort.Slice(out.Members, func(a, b int) bool { return out.Members[a].UsageGPUSeconds > out.Members[b].UsageGPUSeconds })
	samples, err := s.cfg.Store.TeamSamples(ctx, name, since)
	if err != nil {
		return out, err
	}
	for _, sm := range samples {
		out.Samples = append(out.Samples, api.TeamSample{At: sm.At, InUseGPUs: sm.InUseGPUs, BorrowedGPUs: sm.BorrowedGPUs, GuaranteeGPUs: sm.GuaranteeGPUs})
	}
	return out, nil
}

func (s *Server) apiTeam(c echo.Context) error {
	m, err := s.moment(c.Request().Context())
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
	if w := guaranteeWarning(m.teams, s.clusterGPUs()); w != "" && u.Role == models.RoleAdmin {
		t.Warnings = append(t.Warnings, w)
	}
	return c.JSON(http.StatusOK, t)
}

// shareInput is what an admin may change of a team.
type shareInput struct {
	GuaranteeGPUs  *int     `json:"guaranteed_gpus"`
	Weight         *float64 `json:"weight"`
	MaxGPUsPerUser *int     `json:"max_gpus_per_user"`
}

// setShare applies an admin's change to a team's share and audits it.
func (s *Server) setShare(c echo.Context, in shareInput) error {
	name := c.Param("name")
	t, err := s.cfg.Store.Team(c.Request().Context(), name)
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no team %q", name))
	} else if err != nil {
		return err
	}
	g, w, m := t.GuaranteeGPUs, t.Weight, t.MaxGPUsPerUser
	if in.GuaranteeGPUs != nil {
		g = *in.GuaranteeGPUs
	}
	if in.Weight != nil {
		w = *in.Weight
	}
	if in.MaxGPUsPerUser != nil {
		m = *in.MaxGPUsPerUser
	}
	switch {
	case g < 0 || g > app.MaxGPUs:
		return badRequest("guaranteed_gpus: must be from 0 to %d", app.MaxGPUs)
	case !(w >= minTeamWeight) || w > maxTeamWeight:
		// A weight near 0 makes the team's entitlement underflow to 0,
		// and its fair-share factor NaN.
		return badRequest("weight: must be a number from %v to %v", minTeamWeight, maxTeamWeight)
	case m < 0 || m > app.MaxGPUs:
		return badRequest("max_gpus_per_user: must be from 0 (no cap) to %d", app.MaxGPUs)
	}
	if err := s.cfg.Store.SetTeamShare(c.Request().Context(), name, g, w, m); err != nil {
		return err
	}
	s.cfg.Engine.Wake()
	return s.audit(c, "team.share", name, fmt.Sprintf("guarantee %d→%d GPUs, weight %g→%g, per-user cap %d→%d", t.GuaranteeGPUs, g, t.Weight, w, t.MaxGPUsPerUser, m))
}

func (s *Server) apiSetShare(c echo.Context) error {
	var in shareInput
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.setShare(c, in); err != nil {
		return err
	}
	return s.apiTeam(c)
}

// setCap caps a member's GPUs: for the team's lead or an admin.
func (s *Server) setCap(c echo.Context, user string, limit int) error {
	name, u := c.Param("name"), currentUser(c)
	if !(u.Role == models.RoleAdmin || (u.Role == models.RoleLead && u.Team == name)) {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("only the lead of %s or an admin may set its caps", name))
	}
	member, err := s.cfg.Store.UserByName(c.Request().Context(), user)
	if errors.Is(err, models.ErrNotFound) || (err == nil && member.Team != name) {
		return badRequest("user: %q is not a member of %s", user, name)
	} else if err != nil {
		return err
	}
	if limit < 0 || limit > app.MaxGPUs {
		return badRequest("max_gpus: must be from 0 (no cap) to %d", app.MaxGPUs)
	}
	if err := s.cfg.Store.SetUserCap(c.Request().Context(), name, user, limit); err != nil {
		return err
	}
	s.cfg.Engine.Wake()
	return s.audit(c, "team.cap", name, fmt.Sprintf("%s: at most %d GPUs (0: no cap)", user, limit))
}

func (s *Server) apiSetCap(c echo.Context) error {
	var in struct {
		MaxGPUs *int `json:"max_gpus"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if in.MaxGPUs == nil {
		return badRequest("max_gpus: is required (0 removes the cap)")
	}
	if err := s.setCap(c, c.Param("user"), *in.MaxGPUs); err != nil {
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
	m, err := s.moment(c.Request().Context())
	if err != nil {
		return err
	}
	var rows []templates.TeamShareRow
	for _, t := range m.teamShares() {
		rows = append(rows, shareRow(t))
	}
	p := page(c, "Teams", "teams")
	p.Warning = guaranteeWarning(m.teams, s.clusterGPUs())
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

// setTimeLimits sets team name's default and longest time limit, as
// typed (job.ParseTimeLimit; "" for none), for its lead or an admin.
func (s *Server) setTimeLimits(c echo.Context, def, most string) error {
	name, u := c.Param("name"), currentUser(c)
	if !(u.Role == models.RoleAdmin || (u.Role == models.RoleLead && u.Team == name)) {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("only the lead of %s or an admin may set its time limits", name))
	}
	d, err := job.ParseTimeLimit(def)
	if err != nil {
		return badRequest("default_time_limit: %s", err)
	}
	m, err := job.ParseTimeLimit(most)
	if err != nil {
		return badRequest("max_time_limit: %s", err)
	}
	if m > 0 && (d > m) {
		return badRequest("default_time_limit: %s is above the maximum %s", job.FormatTimeLimit(d), job.FormatTimeLimit(m))
	}
	err = s.cfg.Store.SetTeamTimeLimits(c.Request().Context(), name, int64(d/time.Second), int64(m/time.Second))
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("team %s not found", name))
	}
	if err != nil {
		return err
	}
	return s.audit(c, "team.time_limits", name, fmt.Sprintf("default %s, at most %s", job.FormatTimeLimit(d), job.FormatTimeLimit(m)))
}

func (s *Server) apiSetTimeLimits(c echo.Context) error {
	var in struct {
		Default string `json:"default_time_limit"`
		Max     string `json:"max_time_limit"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.setTimeLimits(c, in.Default, in.Max); err != nil {
		return err
	}
	return s.apiTeam(c)
}

// setIdlePolicy sets team name's idle-GPU reclaim policy, for its lead
// or an admin (audited): the API's and the team page's form's one way.
func (s *Server) setIdlePolicy(c echo.Context, in api.IdlePolicy) error {
	name, u := c.Param("name"), currentUser(c)
	if !(u.Role == models.RoleAdmin || (u.Role == models.RoleLead && u.Team == name)) {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("only the lead of %s or an admin may set its idle policy", name))
	}
	if h := in.MaxKeepAliveHours; !(h >= 0) || h > 24*30 || (h > 0 && h*3600 < 1) {
		// Kept in seconds: less than one would be 0, the default.
		return badRequest("max_keep_alive_hours: %v: want 0 (the default, %v hours), or 1 second (0.0003) to 720", h, models.DefaultMaxKeepAlive.Hours())
	}
	p := models.IdlePolicy{SpareSessions: !in.ReclaimSessions, ReclaimBatch: in.ReclaimBatch, MaxKeepAliveS: int64(in.MaxKeepAliveHours * 3600)}
	if v := in.IdleBelowPct; v != nil {
		if err := idle.CheckBelow(*v); err != nil {
			return badRequest("idle_below_pct: %s (null: the server's, %g)", err, s.cfg.Idle.BelowPct)
		}
		p.BelowPct = *v
	}
	if v := in.IdleAfterS; v != nil {
		if *v != math.Trunc(*v) || *v < 0 || *v > idle.MaxAfter.Seconds() || idle.CheckAfter(time.Duration(*v)*time.Second) != nil {
			return badRequest("idle_after_s: %v: want whole seconds from %v to %v, or 0 or null (the server's, %v)",
				*v, idle.MinAfter.Seconds(), idle.MaxAfter.Seconds(), s.cfg.Idle.After.Seconds())
		}
		p.AfterS = int64(*v)
	}
	err := s.cfg.Store.SetTeamIdlePolicy(c.Request().Context(), name, p)
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("team %s not found", name))
	}
	if err != nil {
		return err
	}
	return s.audit(c, "team.idle_policy", name, fmt.Sprintf("idle under %s for %s, reclaim sessions %v, batch jobs %v, keep-alive at most %vh",
		ownOrServer(p.BelowPct > 0, fmt.Sprintf("%g%%", p.BelowPct)), ownOrServer(p.AfterS > 0, shortDuration(time.Duration(p.AfterS)*time.Second)),
		in.ReclaimSessions, in.ReclaimBatch, in.MaxKeepAliveHours))
}

// ownOrServer is v where a team set its own, else "the server's".
func ownOrServer(own bool, v string) string {
	if own {
		return v
	}
	return "the server's"
}

// shortDuration is d as a team's idle time is written and read back on
// its page: "45m", "1h30m", "90s" (time.ParseDuration reads it).
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// apiSetIdlePolicy sets a team's idle-GPU reclaim policy, for its lead
// or an admin: PUT /api/v1/teams/{name}/idle-policy with api.IdlePolicy.
func (s *Server) apiSetIdlePolicy(c echo.Context) error {
	var in api.IdlePolicy
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.setIdlePolicy(c, in); err != nil {
		return err
	}
	return s.apiTeam(c)
}

// setSessionPolicy sets team name's session policy, for its lead or an
// admin (audited): the API's and the team page's form's one way.
func (s *Server) setSessionPolicy(c echo.Context, in api.SessionPolicy) error {
	name, u := c.Param("name"), currentUser(c)
	if !(u.Role == models.RoleAdmin || (u.Role == models.RoleLead && u.Team == name)) {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("only the lead of %s or an admin may set its session policy", name))
	}
	if h := in.MaxSessionHours; !(h >= 0) || h > 24*365 || (h > 0 && math.Round(h*3600) < 1) {
		// Kept in seconds: less than one would be 0, no maximum.
		return badRequest("max_session_hours: %v: want 0 (no maximum), or 1 second (0.0003) to 8760", h)
	}
	if in.PriorityGPUs < 0 || in.PriorityGPUs > app.MaxGPUs {
		return badRequest("priority_gpus: %d: want 0 (no interactive priority) to %d", in.PriorityGPUs, app.MaxGPUs)
	}
	p := models.SessionPolicy{MaxSessionS: int64(math.Round(in.MaxSessionHours * 3600)), SessionPriorityGPUs: in.PriorityGPUs}
	err := s.cfg.Store.SetTeamSessionPolicy(c.Request().Context(), name, p)
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("team %s not found", name))
	}
	if err != nil {
		return err
	}
	return s.audit(c, "team.session_policy", name, fmt.Sprintf("sessions at most %vh, %d GPUs with interactive priority", in.MaxSessionHours, in.PriorityGPUs))
}

// apiSetSessionPolicy sets a team's session policy, for its lead or an
// admin: PUT /api/v1/teams/{name}/session-policy with api.SessionPolicy.
func (s *Server) apiSetSessionPolicy(c echo.Context) error {
	var in api.SessionPolicy
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.setSessionPolicy(c, in); err != nil {
		return err
	}
	return s.apiTeam(c)
}

// sessionPolicyForm is the team page's session policy form:
// max_session_hours and priority_gpus (empty: 0).
func (s *Server) sessionPolicyForm(c echo.Context) error {
	var in api.SessionPolicy
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
	if err := s.setSessionPolicy(c, in); err != nil {
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
			return s.teamFormError(c, badRequest("idle_after: %s (empty: the server's, %s)", err, shortDuration(s.cfg.Idle.After)))
		}
		secs := d.Round(time.Second).Seconds()
		in.IdleAfterS = &secs
	}
	if err := s.setIdlePolicy(c, in); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Idle GPU policy saved.")
}

func (s *Server) timeLimitsForm(c echo.Context) error {
	if err := s.setTimeLimits(c, c.FormValue("default_time_limit"), c.FormValue("max_time_limit")); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Time limits saved.")
}

func (s *Server) teamPage(c echo.Context) error {
	return s.renderTeam(c, http.StatusOK, "", "")
}

func (s *Server) renderTeam(c echo.Context, status int, flash, notice string) error {
	m, err := s.moment(c.Request().Context())
	if err != nil {
		return err
	}
	t, err := s.team(c, m)
	if err != nil {
		return err
	}
	u := currentUser(c)
	v := templates.Team{Share: shareRow(t.TeamShare),
		CanEditShare: u.Role == models.RoleAdmin,
		CanEditCaps:  u.Role == models.RoleAdmin || (u.Role == models.RoleLead && u.Team == t.Name)}
	v.ShowShares = v.CanEditCaps
	for i := range m.teams {
		if m.teams[i].Name == t.Name {
			v.Idle = s.teamIdle(&m.teams[i])
		}
	}
	v.Sessions = templates.TeamSessions{MaxHours: strconv.FormatFloat(t.SessionPolicy.MaxSessionHours, 'g', -1, 64),
		PriorityGPUs: t.SessionPolicy.PriorityGPUs}
	shares := map[string]sched.UserShare{}
	if v.ShowShares {
		for _, us := range s.cfg.Engine.UserShares(t.Name) {
			shares[us.User] = us
		}
	}
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
	v.Samples = append(v.Samples, [4]float64{float64(m.now.Unix()), t.InUseGPUs, t.BorrowedGPUs, float64(t.GuaranteeGPUs)})
	for _, j := range s.teamTopic(m, currentUser(c), t.Name).Queue {
		v.Queue = append(v.Queue, templates.TeamQueueRow{ID: j.ID, Name: j.Name, User: j.User, State: string(j.State),
			GPUs: j.GPUs, Queue: j.Queue, Attained: fmt.Sprintf("%.0f", j.AttainedService)})
	}
	if v.Flags, err = s.teamFlags(c.Request().Context(), m, u, t.Name); err != nil {
		return err
	}
	p := page(c, "Team "+t.Name, "teams")
	p.Charts, p.Flash, p.Notice = true, flash, notice
	if u.Role == models.RoleAdmin {
		p.Warning = guaranteeWarning(m.teams, s.clusterGPUs())
	}
	return s.render(c, status, templates.TeamPage(p, v))
}

// teamIdle is team t's idle policy as its page shows it: its own rule's
// fields (empty where it has none) with the server's as placeholders, and
// in a sentence the rule in force and the server's grace.
func (s *Server) teamIdle(t *models.Team) templates.TeamIdle {
	terms := s.teamIdleTerms(t)
	p := idlePolicyOf(t)
	out := templates.TeamIdle{ReclaimSessions: p.ReclaimSessions, ReclaimBatch: p.ReclaimBatch,
		MaxKeepAliveHours: strconv.FormatFloat(p.MaxKeepAliveHours, 'g', -1, 64),
		DefaultBelowPct:   strconv.FormatFloat(s.cfg.Idle.BelowPct, 'g', -1, 64), DefaultAfter: "none"}
	if s.cfg.Idle.After > 0 {
		out.DefaultAfter = shortDuration(s.cfg.Idle.After)
	}
	if t.IdleBelowPct > 0 {
		out.BelowPct = strconv.FormatFloat(t.IdleBelowPct, 'g', -1, 64)
	}
	if t.IdleAfterS > 0 {
		out.After = shortDuration(time.Duration(t.IdleAfterS) * time.Second)
	}
	out.InForce = fmt.Sprintf("under %g%% for %s", terms.rule.BelowPct, shortDuration(terms.rule.After))
	switch {
	case !terms.rule.Valid():
		out.InForce = "never (no idle time set)"
	case t.IdleBelowPct == 0 && t.IdleAfterS == 0:
		out.InForce += " (the server's)"
	}
	if !terms.rule.Valid() {
		out.Rule = "No job of this team is flagged idle: this server sets no idle time (serve --idle-after 0) and the team none of its own."
		return out
	}
	out.Rule = fmt.Sprintf("A running job of this team is idle when all its GPUs are under %g%% utilization for %s; ", terms.rule.BelowPct, shortDuration(terms.rule.After))
	if s.cfg.ReclaimGrace > 0 {
		out.Rule += fmt.Sprintf("where this policy says so, it is warned, then stopped %s later (server settings).", shortDuration(s.cfg.ReclaimGrace))
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
	return err
}

func (s *Server) shareForm(c echo.Context) error {
	var in shareInput
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
	if err := s.setShare(c, in); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Share saved.")
}

func (s *Server) capForm(c echo.Context) error {
	limit, err := formInt(c, "max_gpus")
	if err != nil {
		return s.teamFormError(c, err)
	}
	if limit == nil {
		return s.teamFormError(c, badRequest("max_gpus: is required (0 removes the cap)"))
	}
	if err := s.setCap(c, c.FormValue("user"), *limit); err != nil {
		return s.teamFormError(c, err)
	}
	return s.renderTeam(c, http.StatusOK, "", "Cap saved.")
}
