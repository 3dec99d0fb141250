package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// Idle GPUs given back: each team's terms (its rule over the server's,
// and its reclaim policy), the warning to a job's owner, and the reclaim
// itself, through the engine as a cancel does. Which jobs are idle is
// judged from the GPUs' readings by the caller (the leader's reclaim
// loop, package web).

// ReclaimStore is what reclaiming idle jobs reads and writes.
type ReclaimStore interface {
	ListJobs(ctx context.Context, f models.JobFilter) ([]models.Job, error)
	EnqueueIdleNotification(ctx context.Context, j *models.Job, reclaimAt, now time.Time) (int, error)
	RecordReclaim(ctx context.Context, ref job.RunRef, gpuSeconds float64, at time.Time) error
}

// ReclaimEngine is the part of the engine that stops a reclaimed job.
type ReclaimEngine interface {
	// Preempt stops a running batch job, which waits again.
	Preempt(ctx context.Context, id int64, reason string) error
}

// IdleTerms are what judge a team's running jobs idle and what is done
// with them: its rule (its own settings, else the server's) and its
// reclaim policy.
type IdleTerms struct {
	Rule   idle.Rule
	Policy idle.Policy
}

// TeamIdleTerms is team t's idle terms: the one place a team's rule is
// made, from its own settings over the server's (Config.Idle).
func (s *App) TeamIdleTerms(t *Team) IdleTerms { return s.teamIdleTerms(&t.row) }

// teamIdleTerms is TeamIdleTerms for a row.
func (s *App) teamIdleTerms(t *models.Team) IdleTerms {
	return IdleTerms{Rule: s.cfg.Idle.Override(t.IdleRule()),
		Policy: idle.Policy{Sessions: !t.IdleSpareSessions, Batch: t.IdleReclaimBatch, MaxKeepAlive: t.MaxKeepAlive()}}
}

// DefaultIdleTerms are the terms of a team that cannot be read: the
// server's rule, its sessions reclaimed, the default keep-alive.
func (s *App) DefaultIdleTerms() IdleTerms {
	return IdleTerms{Rule: s.cfg.Idle, Policy: idle.Policy{Sessions: true, MaxKeepAlive: models.DefaultMaxKeepAlive}}
}

// IdleTermsOf is team's idle terms, read from the store; the default
// ones where it cannot be read.
func (s *App) IdleTermsOf(ctx context.Context, team string) IdleTerms {
	t, err := s.cfg.Store.Team(ctx, team)
	if err != nil {
		s.cfg.Logger.Warn("idle terms: read team", "team", team, "err", err)
		return s.DefaultIdleTerms()
	}
	return s.teamIdleTerms(t)
}

// AllIdleTerms reads every team's idle terms, by team, for a list or a
// reclaim pass that judges many jobs.
func (s *App) AllIdleTerms(ctx context.Context) (map[string]IdleTerms, error) {
	teams, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		return nil, fmt.Errorf("read teams' idle rules: %w", stored(err))
	}
	out := make(map[string]IdleTerms, len(teams))
	for i := range teams {
		out[teams[i].Name] = s.teamIdleTerms(&teams[i])
	}
	return out, nil
}

// runningJobs are the jobs running now, for the reclaim loop to judge.
func (s *App) runningJobs(ctx context.Context) ([]models.Job, error) {
	js, err := s.cfg.Store.ListJobs(ctx, models.JobFilter{States: []models.JobState{models.JobRunning}})
	if err != nil {
		return nil, fmt.Errorf("list running jobs: %w", stored(err))
	}
	return js, nil
}

// warnIdle tells j's owner, once per run and where they chose it, that
// j is idle and will be reclaimed at reclaimAt; now is the pass's time.
func (s *App) warnIdle(ctx context.Context, j *models.Job, reclaimAt, now time.Time) error {
	if _, err := s.cfg.Store.EnqueueIdleNotification(ctx, j, reclaimAt, now); err != nil {
		return fmt.Errorf("warn job %d: %w", j.ID, stored(err))
	}
	return nil
}

// reclaimIdle stops j, idle since since, through the engine: a session
// ends cancelled, a batch job is preempted and waits again at the back
// of its queue. It returns the GPU-seconds given back (j's GPUs times
// how long they had been idle, recorded on the run for accounting), and
// false where j ended meanwhile; now is the pass's time.
func (s *App) reclaimIdle(ctx context.Context, j *models.Job, since, now time.Time) (float64, bool, error) {
	reason := "reclaimed: idle since " + since.Local().Format("15:04")
	stop := s.cfg.Engine.Cancel // a session ends
	if !j.IsSession() {
		stop = s.cfg.Engine.Preempt // a batch job waits again
	}
	gpuSeconds := float64(j.GPUs) * max(now.Sub(since).Seconds(), 0)
	if err := s.cfg.Store.RecordReclaim(ctx, job.RunRef{Job: j.ID, Run: j.Run}, gpuSeconds, now); err != nil {
		if errors.Is(err, models.ErrConflict) {
			return 0, false, nil // it ended meanwhile
		}
		return 0, false, fmt.Errorf("reclaim job %d: %w", j.ID, stored(err))
	}
	if err := stop(ctx, j.ID, reason); err != nil {
		return 0, false, fmt.Errorf("reclaim job %d: %w", j.ID, err)
	}
	s.cfg.Logger.Info("reclaimed idle job", "job", j.ID, "team", j.Team, "gpus", j.GPUs, "idle_since", since)
	return gpuSeconds, true, nil
}
