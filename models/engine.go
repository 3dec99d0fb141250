package models

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/sched"
)

// Store implements engine.Store.
var _ engine.Store = (*Store)(nil)

// UnfinishedEngineJobs returns the unfinished jobs as the engine sees them.
// Held jobs (Job.Held) are left out, so that the engine never schedules
// them, unless a replica asked for their cancel, which the engine
// carries out.
func (s *Store) UnfinishedEngineJobs(ctx context.Context) ([]engine.Job, error) {
	js, err := s.UnfinishedJobs(ctx)
	if err != nil {
		return nil, err
	}
	js = slices.DeleteFunc(js, func(j Job) bool { return j.Held() && j.CancelRequest == "" })
	out := make([]engine.Job, len(js))
	for i := range js {
		out[i] = engineJob(&js[i])
	}
	return out, nil
}

// SetQueueStates records the queue state the scheduler handed back for
// each job, so that the next pass (and the next server) sees it.
func (s *Store) SetQueueStates(ctx context.Context, states map[int64]sched.QueueState) error {
	if len(states) == 0 {
		return nil
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for id, q := range states {
			err := tx.Model(&Job{}).Where("id = ?", id).Updates(map[string]any{
				"queue_index": q.Index, "queue_since": q.Since, "cycle_start": q.CycleStart,
				"cycle_service": q.CycleService, "cycle_executed": q.CycleExecuted, "promotions": q.Promotions,
			}).Error
			if err != nil {
				return fmt.Errorf("set queue state of job %d: %w", id, err)
			}
		}
		return nil
	})
}

// CompletedGPUTimes returns the attained service (GPU-seconds) of up to
// limit recently succeeded jobs: what tiresias-g learns its distribution from.
func (s *Store) CompletedGPUTimes(ctx context.Context, limit int) ([]float64, error) {
	var out []float64
	err := s.db.WithContext(ctx).Model(&Job{}).Where("state = ? AND attained_service > 0", JobSucceeded).
		Order("id DESC").Limit(limit).Pluck("attained_service", &out).Error
	if err != nil {
		return nil, fmt.Errorf("completed GPU times: %w", err)
	}
	return out, nil
}

// Store implements engine.TeamStore.
var _ engine.TeamStore = (*Store)(nil)

// EngineTeams returns every team's share, caps and saved usage.
func (s *Store) EngineTeams(ctx context.Context) ([]engine.Team, error) {
	ts, err := s.Teams(ctx)
	if err != nil {
		return nil, err
	}
	caps, err := s.UserCaps(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Team, len(ts))
	for i, t := range ts {
		out[i] = engine.Team{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, Weight: t.Weight,
			MaxGPUsPerUser: t.MaxGPUsPerUser, UserCaps: caps[t.Name],
			UsageGPUSeconds: t.UsageGPUSeconds, UsageAt: t.UsageAt}
	}
	return out, nil
}

// RecordTeamSamples stores where teams stood.
func (s *Store) RecordTeamSamples(ctx context.Context, samples []engine.TeamSample) error {
	rows := make([]TeamSample, len(samples))
	for i, t := range samples {
		rows[i] = TeamSample{Team: t.Team, At: t.At, InUseGPUs: t.InUseGPUs, BorrowedGPUs: t.BorrowedGPUs, GuaranteeGPUs: t.GuaranteeGPUs}
	}
	return s.AddTeamSamples(ctx, rows)
}
