package models

import (
	"context"

	"github.com/gpuportal/gpuportal/core/engine"
)

// Store implements engine.Store.
var _ engine.Store = (*Store)(nil)

// UnfinishedEngineJobs returns the unfinished jobs as the engine sees them.
func (s *Store) UnfinishedEngineJobs(ctx context.Context) ([]engine.Job, error) {
	js, err := s.UnfinishedJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Job, len(js))
	for i, j := range js {
		out[i] = engine.Job{
			ID: j.ID, Team: j.Team, User: j.User, GPUs: j.GPUs, GPUMemMiB: j.GPUMemMiB,
			Command: j.Command, SimDuration: j.SimDuration, State: j.State,
			SubmittedAt: j.SubmittedAt, Placement: j.Placement, LastStartAt: j.LastStartAt,
			ExecutedS: j.ExecutedS, AttainedService: j.AttainedService,
		}
	}
	return out, nil
}
