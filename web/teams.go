package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// TeamShareJSON is where a team stands under fair share, with the inputs
// of its factor F = 2^(-U/S) (see docs/fair-share.md).
type TeamShareJSON struct {
	Name            string  `json:"name"`
	GuaranteeGPUs   int     `json:"guaranteed_gpus"`
	Weight          float64 `json:"weight"`
	MaxGPUsPerUser  int     `json:"max_gpus_per_user"`
	InUseGPUs       int     `json:"in_use_gpus"`
	BorrowedGPUs    int     `json:"borrowed_gpus"`
	UsageGPUSeconds float64 `json:"usage_gpu_s"`
	Entitlement     float64 `json:"entitlement"`       // S: weight over all weights
	UsageShare      float64 `json:"usage_share"`       // U: usage over all usage
	Factor          float64 `json:"fair_share_factor"` // F = 2^(-U/S)
}

// TeamJSON is a team's page: its standing, members, caps and usage over time.
type TeamJSON struct {
	TeamShareJSON
	Members []MemberJSON     `json:"members"`
	Samples []TeamSampleJSON `json:"samples"`
	Window  float64          `json:"usage_window_s"`
	Caps    map[string]int   `json:"caps"`
}

// MemberJSON is one member's usage of the team's GPUs.
type MemberJSON struct {
	User            string  `json:"user"`
	Role            string  `json:"role"`
	UsageGPUSeconds float64 `json:"usage_gpu_s"` // attained service of jobs submitted in the window
	MaxGPUs         int     `json:"max_gpus"`    // their cap; 0 none
}

// TeamSampleJSON is where the team stood at one time.
type TeamSampleJSON struct {
	At            time.Time `json:"at"`
	InUseGPUs     int       `json:"in_use_gpus"`
	BorrowedGPUs  int       `json:"borrowed_gpus"`
	GuaranteeGPUs int       `json:"guaranteed_gpus"`
}

// teamWindow is how far back a team's page looks.
const teamWindow = 7 * 24 * time.Hour

// teamShares returns every team's standing: from the last scheduling pass
// for teams the scheduler knows, from the store for the others.
func (s *Server) teamShares(ctx context.Context) ([]TeamShareJSON, error) {
	ts, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		return nil, err
	}
	live := make(map[string]sched.TeamShare)
	for _, sh := range s.cfg.Engine.FairShare() {
		live[sh.Name] = sh
	}
	out := make([]TeamShareJSON, 0, len(ts))
	for _, t := range ts {
		j := TeamShareJSON{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, Weight: t.Weight, MaxGPUsPerUser: t.MaxGPUsPerUser,
			UsageGPUSeconds: t.UsageGPUSeconds, Factor: 1}
		if sh, ok := live[t.Name]; ok {
			j.InUseGPUs, j.BorrowedGPUs, j.UsageGPUSeconds = sh.InUseGPUs, sh.BorrowedGPUs, sh.UsageGPUSeconds
			j.Entitlement, j.UsageShare, j.Factor = sh.Entitlement, sh.UsageShare, sh.Factor
		}
		out = append(out, j)
	}
	return out, nil
}

func (s *Server) apiTeams(c echo.Context) error {
	ts, err := s.teamShares(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ts)
}

// team returns the team named by :name for a member of it or an admin.
func (s *Server) team(c echo.Context) (TeamJSON, error) {
	name := c.Param("name")
	u := currentUser(c)
	ctx := c.Request().Context()
	if _, err := s.cfg.Store.Team(ctx, name); errors.Is(err, models.ErrNotFound) {
		return TeamJSON{}, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no team %q", name))
	} else if err != nil {
		return TeamJSON{}, err
	}
	if !canSee(u, name) {
		return TeamJSON{}, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("only members of %s and admins may see its page", name))
	}
	shares, err := s.teamShares(c.Request().Context())
	if err != nil {
		return TeamJSON{}, err
	}
	out := TeamJSON{Window: teamWindow.Seconds(), Members: []MemberJSON{}, Samples: []TeamSampleJSON{}}
	for _, sh := range shares {
		if sh.Name == name {
			out.TeamShareJSON = sh
		}
	}
	caps, err := s.cfg.Store.UserCaps(ctx)
	if err != nil {
		return out, err
	}
	out.Caps = caps[name]
	if out.Caps == nil {
		out.Caps = map[string]int{}
	}
	since := s.cfg.Now().Add(-teamWindow)
	usage, err := s.cfg.Store.MemberUsage(ctx, name, since)
	if err != nil {
		return out, err
	}
	users, err := s.cfg.Store.Users(ctx)
	if err != nil {
		return out, err
	}
	for _, m := range users {
		if m.Team == name {
			out.Members = append(out.Members, MemberJSON{User: m.Name, Role: string(m.Role), UsageGPUSeconds: usage[m.Name], MaxGPUs: out.Caps[m.Name]})
		}
	}
	sort.Slice(out.Members, func(a, b int) bool { return out.Members[a].UsageGPUSeconds > out.Members[b].UsageGPUSeconds })
	samples, err := s.cfg.Store.TeamSamples(ctx, name, since)
	if err != nil {
		return out, err
	}
	for _, sm := range samples {
		out.Samples = append(out.Samples, TeamSampleJSON{At: sm.At, InUseGPUs: sm.InUseGPUs, BorrowedGPUs: sm.BorrowedGPUs, GuaranteeGPUs: sm.GuaranteeGPUs})
	}
	return out, nil
}

func (s *Server) apiTeam(c echo.Context) error {
	t, err := s.team(c)
	if err != nil {
		return err
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
	case g < 0 || g > maxGPUs:
		return badRequest("guaranteed_gpus: must be from 0 to %d", maxGPUs)
	case !(w > 0) || w > 1e6 || math.IsInf(w, 0):
		return badRequest("weight: must be a positive number")
	case m < 0 || m > maxGPUs:
		return badRequest("max_gpus_per_user: must be from 0 (no cap) to %d", maxGPUs)
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
	if limit < 0 || limit > maxGPUs {
		return badRequest("max_gpus: must be from 0 (no cap) to %d", maxGPUs)
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
	ts, err := s.teamShares(c.Request().Context())
	if err != nil {
		return err
	}
	var rows []templates.TeamShareRow
	for _, t := range ts {
		rows = append(rows, shareRow(t))
	}
	return s.render(c, http.StatusOK, templates.TeamsPage(page(c, "Teams", "teams"), rows))
}

func shareRow(t TeamShareJSON) templates.TeamShareRow {
	return templates.TeamShareRow{
		Name: t.Name, Guarantee: t.GuaranteeGPUs, InUse: t.InUseGPUs, Borrowed: t.BorrowedGPUs,
		Weight: strconv.FormatFloat(t.Weight, 'g', 4, 64), Usage: fmt.Sprintf("%.0f", t.UsageGPUSeconds),
		Entitlement: fmt.Sprintf("%.3f", t.Entitlement), UsageShare: fmt.Sprintf("%.3f", t.UsageShare),
		Factor: fmt.Sprintf("%.3f", t.Factor), MaxPerUser: t.MaxGPUsPerUser,
	}
}

func (s *Server) teamPage(c echo.Context) error {
	return s.renderTeam(c, http.StatusOK, "", "")
}

func (s *Server) renderTeam(c echo.Context, status int, flash, notice string) error {
	t, err := s.team(c)
	if err != nil {
		return err
	}
	u := currentUser(c)
	v := templates.Team{Share: shareRow(t.TeamShareJSON),
		CanEditShare: u.Role == models.RoleAdmin,
		CanEditCaps:  u.Role == models.RoleAdmin || (u.Role == models.RoleLead && u.Team == t.Name)}
	for _, m := range t.Members {
		v.Members = append(v.Members, templates.MemberRow{User: m.User, Role: m.Role,
			Usage: fmt.Sprintf("%.0f", m.UsageGPUSeconds), MaxGPUs: m.MaxGPUs})
	}
	for _, sm := range t.Samples {
		v.Samples = append(v.Samples, [4]int64{sm.At.Unix(), int64(sm.InUseGPUs), int64(sm.BorrowedGPUs), int64(sm.GuaranteeGPUs)})
	}
	live, err := s.teamTopics(c.Request().Context())
	if err != nil {
		return err
	}
	for _, j := range live(t.Name).Queue {
		v.Queue = append(v.Queue, templates.TeamQueueRow{ID: j.ID, Name: j.Name, User: j.User, State: string(j.State),
			GPUs: j.GPUs, Queue: j.Queue, Attained: fmt.Sprintf("%.0f", j.AttainedService)})
	}
	p := page(c, "Team "+t.Name, "teams")
	p.Charts, p.Flash, p.Notice = true, flash, notice
	return s.render(c, status, templates.TeamPage(p, v))
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
