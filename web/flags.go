package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/templates"
)

// Warnings for leads and admins: jobs that hold GPUs idle, queued jobs a
// cap keeps from ever starting, guarantees that promise more GPUs than
// the cluster has.

// idleJobs are the running jobs of m (of team, or all when "") that hold
// their GPUs idle, longest idle first, with their verdicts.
func (s *Server) idleJobs(ctx context.Context, m *app.Moment, team string) ([]*app.Job, map[int64]*api.Idle, error) {
	var running []*app.Job
	all := m.Running()
	for i := range all {
		j := &all[i]
		if j.State == job.Running && (team == "" || j.Team == team) {
			running = append(running, j)
		}
	}
	st, err := s.app.IdleStates(ctx, running, m.Now)
	if err != nil {
		return nil, nil, err
	}
	var out []*app.Job
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
func idleRows(m *app.Moment, u *app.User, js []*app.Job, st map[int64]*api.Idle) []templates.IdleRow {
	var out []templates.IdleRow
	for _, j := range js {
		r := templates.IdleRow{ID: j.ID, Team: j.Team, GPUs: strings.Join(j.Placement, ", "),
			Short: st[j.ID].Short(m.Now), Text: st[j.ID].Text(m.Now, time.Local), Reclaim: st[j.ID].ReclaimText(m.Now, time.Local)}
		if canSee(u, j.Team) {
			r.Name, r.User = j.Name, j.User
		}
		out = append(out, r)
	}
	return out
}

// strandedRows are stranded jobs as the team page lists them.
func strandedRows(js []app.Stranded) []templates.StrandedRow {
	var out []templates.StrandedRow
	for _, j := range js {
		which := "the team's cap per user"
		if j.OwnCap {
			which = j.User + "'s own cap"
		}
		out = append(out, templates.StrandedRow{ID: j.ID, Name: j.Name, User: j.User,
			Why: fmt.Sprintf("needs %d GPUs; %s is %d: raise it or cancel the job", j.GPUs, which, j.Cap)})
	}
	return out
}

// teamFlags are team's warnings as of m, for viewer u.
func (s *Server) teamFlags(ctx context.Context, m *app.Moment, u *app.User, team string) (templates.TeamFlags, error) {
	f := templates.TeamFlags{Team: team}
	js, st, err := s.idleJobs(ctx, m, team)
	if err != nil {
		return f, err
	}
	f.Idle = idleRows(m, u, js, st)
	stranded, err := s.app.StrandedJobs(ctx, app.Actor{User: u}, m, team)
	if err != nil {
		return f, err
	}
	f.Stranded = strandedRows(stranded)
	return f, nil
}

// teamFlagsPart renders a team's warnings alone: the team page refreshes
// them with it.
func (s *Server) teamFlagsPart(c echo.Context) error {
	ctx := c.Request().Context()
	m, err := s.app.Moment(ctx)
	if err != nil {
		return err
	}
	name := c.Param("name")
	if _, ok := m.Team(name); !ok {
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
func guaranteeWarning(teams []api.TeamShare, clusterGPUs int) string {
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
