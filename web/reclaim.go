package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
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
// at the back of its queue (app.App.ReclaimIdle), so the freed
// GPUs go to the jobs waiting at the engine's next pass. The job page and the API show the warning (Idle.ReclaimAt) from
// the same verdict.
func (s *Server) RunReclaim(ctx context.Context, leader func() bool, every time.Duration) {
	if !s.app.Reclaims() {
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

// reclaimOnce judges every running job and reclaims those due now
// (app.App.ReclaimPass), counting what each reclaim gave back in /metrics.
func (s *Server) reclaimOnce(ctx context.Context, now time.Time) error {
	done, err := s.app.ReclaimPass(ctx, now)
	for _, r := range done {
		s.reclaimed.WithLabelValues(r.Team).Add(r.GPUSeconds)
	}
	return err
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
