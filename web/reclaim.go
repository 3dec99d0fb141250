package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// RunReclaim gives idle GPUs back until ctx ends: every every, on the
// leader replica only (leader), it judges each running job afresh
// under its team's rule and reclaim policy (teamIdleTerms: core/idle
// Detect, then Decide with serve --idle-reclaim-grace) and stops those due, through the engine, as a cancel
// does: the checkpoint signal first (SIGTERM, the stop grace, SIGKILL),
// the job's folder kept, the reason "reclaimed: idle since HH:MM" on its
// page. A warned job's owner is told once per run (notification event
// "idle", where they chose it). A session ends cancelled; a batch job
// (where its team's policy reclaims those) is preempted and waits again
// at the back of its queue (models.Store.RecordReclaim), so the freed
// GPUs go to the jobs waiting at the engine's next pass. The job page and the API show the warning (Idle.ReclaimAt) from
// the same verdict.
func (s *Server) RunReclaim(ctx context.Context, leader func() bool, every time.Duration) {
	if s.cfg.ReclaimGrace <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !leader() {
			continue
		}
		if err := s.reclaimOnce(ctx, time.Now()); err != nil {
			s.cfg.Logger.Warn("reclaim idle jobs", "err", err)
		}
	}
}

// reclaimOnce stops every running job that Decide says to reclaim now,
// each judged under its team's terms (app.App.ReclaimIdle).
func (s *Server) reclaimOnce(ctx context.Context, now time.Time) error {
	js, err := s.app.RunningJobs(ctx)
	if err != nil || len(js) == 0 {
		return err
	}
	terms, err := s.allIdleTerms(ctx)
	if err != nil {
		return err
	}
	for i := range js {
		j := &js[i]
		t := terms.of(j.Team)
		if j.State != job.Running || !t.rule.Valid() || !t.policy.Reclaims(j.IsSession()) {
			continue
		}
		start, _, ok := runWindow(j, now)
		if !ok {
			continue
		}
		from := maxTime(start, now.Add(-t.rule.Lookback()))
		readings, err := s.gpuReadings(ctx, placementKeys(j.Placement), from, now)
		if err != nil {
			return fmt.Errorf("job %d readings: %w", j.ID, err)
		}
		st := detectState(j, t.rule, readings, now)
		v := s.reclaimVerdict(j, st, t, now)
		if v.Action == idle.Warn {
			if err := s.app.WarnIdle(ctx, j, v.ReclaimAt, now); err != nil {
				return err
			}
		}
		if v.Action != idle.Reclaim {
			continue
		}
		// What the reclaim gives back, recorded on the run (accounting)
		// and counted in /metrics: one figure for both.
		gpuSeconds, ok, err := s.app.ReclaimIdle(ctx, j, st.Since, now)
		if err != nil {
			return err
		}
		if ok {
			s.reclaimed.WithLabelValues(j.Team).Add(gpuSeconds)
		}
	}
	return nil
}

// idleTerms are what judge a team's running jobs idle and what is done
// with them (app.IdleTerms).
type idleTerms struct {
	rule   idle.Rule
	policy idle.Policy
}

func termsOf(t app.IdleTerms) idleTerms { return idleTerms{rule: t.Rule, policy: t.Policy} }

// teamIdleTerms is team t's idle terms (app.App.TeamIdleTerms), for the
// job, jobs list, team and cluster pages, the API and the reclaim loop
// alike.
func (s *Server) teamIdleTerms(t *models.Team) idleTerms {
	return termsOf(s.app.TeamIdleTerms(t))
}

// idleTermsOf is team's idle terms, read from the store; the default
// ones where it cannot be read.
func (s *Server) idleTermsOf(ctx context.Context, team string) idleTerms {
	return termsOf(s.app.IdleTermsOf(ctx, team))
}

// teamsIdleTerms are every team's idle terms, read at once.
type teamsIdleTerms struct {
	byTeam map[string]app.IdleTerms
	def    idleTerms
}

// of is team's terms; the default ones for a team not read.
func (ts teamsIdleTerms) of(team string) idleTerms {
	if t, ok := ts.byTeam[team]; ok {
		return termsOf(t)
	}
	return ts.def
}

// allIdleTerms reads every team's idle terms, for a list or a reclaim
// pass that judges many jobs.
func (s *Server) allIdleTerms(ctx context.Context) (teamsIdleTerms, error) {
	byTeam, err := s.app.AllIdleTerms(ctx)
	if err != nil {
		return teamsIdleTerms{}, err
	}
	return teamsIdleTerms{byTeam: byTeam, def: termsOf(s.app.DefaultIdleTerms())}, nil
}

func (s *Server) apiKeepAlive(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	var req api.KeepAliveRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	j, err := s.app.KeepAlive(c.Request().Context(), appActor(c), id, req)
	if err != nil {
		return err
	}
	return s.jobResponse(c, http.StatusOK, j)
}

func (s *Server) keepAliveForm(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	hours, err := strconv.ParseFloat(c.FormValue("hours"), 64)
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("hours %q: want a number of hours", c.FormValue("hours")))
	}
	j, err := s.app.KeepAlive(c.Request().Context(), appActor(c), id, api.KeepAliveRequest{Hours: hours})
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/jobs/%d", j.ID))
}
