package web

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// Warnings for leads and admins: jobs that hold GPUs idle, queued jobs a
// cap keeps from ever starting, guarantees that promise more GPUs than
// the cluster has.

// idleJobs are the running jobs of m (of team, or all when "") that hold
// their GPUs idle, longest idle first, with their verdicts.
func (s *Server) idleJobs(ctx context.Context, m *moment, team string) ([]*models.Job, map[int64]*api.Idle, error) {
	var running []*models.Job
	for i := range m.running {
		j := &m.running[i]
		if j.State == job.Running && (team == "" || j.Team == team) {
			running = append(running, j)
		}
	}
	st, err := s.app.IdleStates(ctx, running, m.now)
	if err != nil {
		return nil, nil, err
	}
	var out []*models.Job
	for _, j := range running {
		if st[j.ID] != nil && st[j.ID].Idle {
			out = append(out, j)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return st[out[a].ID].Since.Before(*st[out[b].ID].Since) })
	return out, st, nil
}

// idleRows are idle jobs js with their verdicts st as pages list them
// for viewer u.
func idleRows(m *moment, u *models.User, js []*models.Job, st map[int64]*api.Idle) []templates.IdleRow {
	var out []templates.IdleRow
	for _, j := range js {
		r := templates.IdleRow{ID: j.ID, Team: j.Team, GPUs: strings.Join(j.Placement, ", "),
			Short: st[j.ID].Short(m.now), Text: st[j.ID].Text(m.now, time.Local)}
		if canSee(u, j.Team) {
			r.Name, r.User = j.Name, j.User
		}
		out = append(out, r)
	}
	return out
}

// strandedJobs are the waiting jobs of team that need more GPUs than their
// user's cap (sched.Team.CapOf): they cannot start until it is raised.
// caps are the per-user caps of every team (Store.UserCaps).
func strandedJobs(m *moment, team string, caps map[string]map[string]int) []templates.StrandedRow {
	i := slices.IndexFunc(m.teams, func(t models.Team) bool { return t.Name == team })
	if i < 0 {
		return nil
	}
	t := sched.Team{Name: team, MaxGPUsPerUser: m.teams[i].MaxGPUsPerUser, UserCaps: caps[team]}
	var out []templates.StrandedRow
	for k := range m.queued {
		j := &m.queued[k]
		if j.Team != team || !j.State.Waiting() {
			continue
		}
		c := t.CapOf(j.User)
		if c <= 0 || j.GPUs <= c {
			continue
		}
		which := "the team's cap per user"
		if caps[team][j.User] > 0 {
			which = j.User + "'s own cap"
		}
		out = append(out, templates.StrandedRow{ID: j.ID, Name: j.Name, User: j.User,
			Why: fmt.Sprintf("needs %d GPUs; %s is %d: raise it or cancel the job", j.GPUs, which, c)})
	}
	return out
}

// teamFlags are team's warnings as of m, for viewer u.
func (s *Server) teamFlags(ctx context.Context, m *moment, u *models.User, team string) (templates.TeamFlags, error) {
	f := templates.TeamFlags{Team: team}
	js, st, err := s.idleJobs(ctx, m, team)
	if err != nil {
		return f, err
	}
	f.Idle = idleRows(m, u, js, st)
	caps, err := s.cfg.Store.UserCaps(ctx)
	if err != nil {
		return f, err
	}
	f.Stranded = strandedJobs(m, team, caps)
	return f, nil
}

// teamFlagsPart renders a team's warnings alone: the team page refreshes
// them with it.
func (s *Server) teamFlagsPart(c echo.Context) error {
	ctx := c.Request().Context()
	m, err := s.moment(ctx)
	if err != nil {
		return err
	}
	name := c.Param("name")
	if !slices.ContainsFunc(m.teams, func(t models.Team) bool { return t.Name == name }) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no team %q", name))
	}
	u := currentUser(c)
	if !canSee(u, name) {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("only members of %s and admins may see its page", name))
	}
	f, err := s.teamFlags(ctx, m, u, name)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.TeamFlagsView(f))
}

// guaranteeWarning says when the teams' guarantees together promise more
// GPUs than the cluster has; "" when they do not. clusterGPUs 0 (no
// machine connected yet) says nothing.
func guaranteeWarning(teams []models.Team, clusterGPUs int) string {
	sum := 0
	for _, t := range teams {
		sum += t.GuaranteeGPUs
	}
	if clusterGPUs <= 0 || sum <= clusterGPUs {
		return ""
	}
	return fmt.Sprintf("The teams' guarantees add up to %d GPUs, more than the cluster's %d: "+
		"not every team can have its guarantee at once, and jobs within a guarantee may wait. Lower a guarantee or add machines.",
		sum, clusterGPUs)
}
