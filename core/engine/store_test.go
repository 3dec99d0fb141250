package engine

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/synergy"
)

// Every test store is a whole Store: the engine asserts none of its
// methods, so one that lacks a method does not compile.
var (
	_ Store = (*memStore)(nil)
	_ Store = (*batchStore)(nil)
	_ Store = (*countingStore)(nil)
	_ Store = (*notingStore)(nil)
	_ Store = (*racingStore)(nil)
	_ Store = (*reasonCounter)(nil)
	_ Store = (*teamStore)(nil)
	_ Store = (*userTeamStore)(nil)
	_ Store = noHistory{}
)

// MarkStartedAll records each start as MarkStarted does, as the real
// store does in one transaction.
func (s *memStore) MarkStartedAll(ctx context.Context, starts []StartRecord, now time.Time) ([]int64, []error, error) {
	runs, errs := make([]int64, len(starts)), make([]error, len(starts))
	for i, st := range starts {
		runs[i], errs[i] = s.MarkStarted(ctx, st.JobID, st.Placement, now)
	}
	return runs, errs, nil
}

// RequestCancel records cancel requests as the real store does: a
// waiting job ends at once, a running one keeps the request.
func (s *memStore) RequestCancel(_ context.Context, id int64, reason string, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	switch {
	case j.State.Waiting():
		j.State = job.Cancelled
	case j.State == job.Running:
		j.CancelRequest = reason
	default:
		return errConflict
	}
	return nil
}

// memStore has no teams (fair share is off; teamStore adds them), keeps
// no users' usage (userTeamStore does), no CPU profiles and no job notes
// (notingStore keeps both), and drops the latest forecasts, which only
// follower replicas read.

func (s *memStore) EngineTeams(context.Context) ([]Team, error) { return nil, nil }
func (s *memStore) SetTeamUsage(context.Context, map[string]float64, time.Time) error {
	return nil
}
func (s *memStore) RecordTeamSamples(context.Context, []TeamSample) error      { return nil }
func (s *memStore) UserUsages(context.Context) ([]UserUsage, error)            { return nil, nil }
func (s *memStore) SetUserUsage(context.Context, []UserUsage, time.Time) error { return nil }
func (s *memStore) SaveCPUProfile(context.Context, synergy.LearnedProfile) error {
	return nil
}
func (s *memStore) CPUProfiles(context.Context) ([]synergy.LearnedProfile, error) { return nil, nil }
func (s *memStore) AddJobNote(context.Context, int64, string, time.Time) error    { return nil }
func (s *memStore) SetLatestForecasts(context.Context, []ForecastRecord) error    { return nil }
