package app

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/core/whatif"
	"github.com/gpuportal/gpuportal/models"
)

// WhatIfStore is what a what-if replay reads of the store; *models.Store
// is one. The store keeps rows; these functions turn them into what
// core/whatif replays.
type WhatIfStore interface {
	JobsToReplay(ctx context.Context, since time.Time, limit int) ([]models.Job, error)
	GPUsSeen(ctx context.Context, since time.Time) ([]models.GPUSeen, []string, error)
	Teams(ctx context.Context) ([]models.Team, error)
}

// WhatIfHistory returns the jobs that succeeded or failed at or after
// since, having run (models.Store.JobsToReplay), as records to replay,
// oldest submit first, at most limit of them (the most recently
// finished).
func WhatIfHistory(ctx context.Context, st WhatIfStore, since time.Time, limit int) ([]whatif.Record, error) {
	js, err := st.JobsToReplay(ctx, since, limit)
	if err != nil {
		return nil, err
	}
	out := make([]whatif.Record, len(js))
	for i := range js {
		out[i] = whatIfRecord(&js[i])
	}
	slices.SortFunc(out, func(a, b whatif.Record) int {
		return cmp.Or(a.Submitted.Compare(b.Submitted), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// whatIfRecord is the record of a finished job that the what-if replay
// reads.
func whatIfRecord(j *models.Job) whatif.Record {
	r := whatif.Record{
		ID: j.ID, Name: j.Name, Team: j.Team, User: j.User, Model: j.Model,
		GPUs: j.GPUs, GPUMilli: 1000, GPUMemMiB: j.GPUMemMiB,
		Submitted: j.SubmittedAt, ExecutedS: j.ExecutedS,
		TimeLimitS: j.TimeLimitS, Preemptions: j.Preemptions,
	}
	if j.IsSession() {
		r.Class = "session"
	}
	if j.GPUFraction > 0 && j.GPUFraction < 1 {
		r.GPUMilli = max(1, int(math.Round(j.GPUFraction*1000)))
	}
	if j.StartedAt != nil {
		r.Started = *j.StartedAt
	}
	if j.FinishedAt != nil {
		r.Finished = *j.FinishedAt
	}
	return r
}

// GPUsSeen returns the GPUs the cluster had at or after since: those of
// the GPU history, with their memory, and those the runs started since
// were placed on.
func GPUsSeen(ctx context.Context, st WhatIfStore, since time.Time) ([]whatif.GPU, error) {
	hist, placements, err := st.GPUsSeen(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make([]whatif.GPU, 0, len(hist))
	for _, h := range hist {
		out = append(out, whatif.GPU{Ref: gpu.Ref{Node: h.Node, Index: h.GPUIndex}, MemMiB: h.MemMiB})
	}
	for _, p := range placements {
		for _, r := range gpu.ParsePlacement(strings.Split(p, ",")) {
			out = append(out, whatif.GPU{Ref: r})
		}
	}
	return out, nil
}

// WhatIfTeams returns the teams, with their guarantees, weights and caps
// per user, as the replay takes them.
func WhatIfTeams(ctx context.Context, st WhatIfStore) ([]trace.Team, error) {
	ts, err := st.Teams(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]trace.Team, len(ts))
	for i, t := range ts {
		out[i] = trace.Team{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, Weight: t.Weight, MaxGPUsPerUser: t.MaxGPUsPerUser}
	}
	return out, nil
}
