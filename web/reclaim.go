package web

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// RunReclaim gives idle GPUs back until ctx ends: every every, on the
// leader replica only (leader), it judges each running job afresh
// (core/idle Detect, then Decide with serve --idle-reclaim-grace and the
// reclaim policy) and stops those due, through the engine, as a cancel
// does: the checkpoint signal first (SIGTERM, the stop grace, SIGKILL),
// the job's folder kept, the reason "reclaimed: idle since HH:MM" on its
// page. The freed GPUs go to the next waiting job at the engine's next
// pass. Warnings need no action here: the job page and the API show
// Idle.ReclaimAt from the same verdict.
func (s *Server) RunReclaim(ctx context.Context, leader func() bool, every time.Duration) {
	if s.cfg.ReclaimGrace <= 0 || !s.cfg.Idle.Valid() {
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

// reclaimOnce stops every running job that Decide says to reclaim now.
func (s *Server) reclaimOnce(ctx context.Context, now time.Time) error {
	js, err := s.cfg.Store.ListJobs(ctx, models.JobFilter{States: []models.JobState{models.JobRunning}})
	if err != nil {
		return fmt.Errorf("list running jobs: %w", err)
	}
	for i := range js {
		j := &js[i]
		if j.State != job.Running {
			continue
		}
		start, _, ok := runWindow(j, now)
		if !ok {
			continue
		}
		from := maxTime(start, now.Add(-s.cfg.Idle.Lookback()))
		readings, err := s.gpuReadings(ctx, placementKeys(j.Placement), from, now)
		if err != nil {
			return fmt.Errorf("job %d readings: %w", j.ID, err)
		}
		st := s.detectState(j, readings, now)
		v := s.reclaimVerdict(j, st, now)
		if v.Action != idle.Reclaim {
			continue
		}
		reason := "reclaimed: idle since " + st.Since.Local().Format("15:04")
		if err := s.cfg.Engine.Cancel(ctx, j.ID, reason); err != nil {
			return fmt.Errorf("reclaim job %d: %w", j.ID, err)
		}
		s.reclaimed.WithLabelValues(j.Team).Add(float64(j.GPUs) * now.Sub(st.Since).Seconds())
		s.cfg.Logger.Info("reclaimed idle job", "job", j.ID, "team", j.Team, "gpus", j.GPUs, "idle_since", st.Since)
	}
	return nil
}
