package models

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/core/whatif"
)

// WhatIfHistory returns the jobs that succeeded or failed at or after
// since, having run, as records to replay (core/whatif), oldest submit
// first, at most limit of them (the most recently finished). Cancelled
// jobs are left out: they ran for as long as someone let them, not for
// the work they had.
func (s *Store) WhatIfHistory(ctx context.Context, since time.Time, limit int) ([]whatif.Record, error) {
	var js []Job
	err := s.db.WithContext(ctx).
		Where("state IN ? AND finished_at >= ? AND started_at IS NOT NULL", []JobState{JobSucceeded, JobFailed}, since).
		Order("finished_at DESC, id DESC").Limit(limit).Find(&js).Error
	if err != nil {
		return nil, fmt.Errorf("what-if history since %s: %w", since.Format(time.RFC3339), err)
	}
	out := make([]whatif.Record, len(js))
	for i := range js {
		out[i] = WhatIfRecord(&js[i])
	}
	slices.SortFunc(out, func(a, b whatif.Record) int {
		return cmp.Or(a.Submitted.Compare(b.Submitted), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// WhatIfRecord is the record of a finished job that the what-if replay
// reads.
func WhatIfRecord(j *Job) whatif.Record {
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
func (s *Store) GPUsSeen(ctx context.Context, since time.Time) ([]whatif.GPU, error) {
	var hist []struct {
		Node     string `gorm:"column:node"`
		GPUIndex int    `gorm:"column:gpu_index"`
		MemMiB   int64  `gorm:"column:mem_mib"`
	}
	err := s.db.WithContext(ctx).Model(&GPUHistory{}).Select("node, gpu_index, MAX(mem_mib) AS mem_mib").
		Where("start >= ?", since.Unix()).Group("node, gpu_index").Scan(&hist).Error
	if err != nil {
		return nil, fmt.Errorf("GPUs seen since %s: %w", since.Format(time.RFC3339), err)
	}
	var placements []string
	err = s.db.WithContext(ctx).Model(&Run{}).Distinct("placement").Where("started_at >= ?", since).Pluck("placement", &placements).Error
	if err != nil {
		return nil, fmt.Errorf("GPUs of runs since %s: %w", since.Format(time.RFC3339), err)
	}
	out := make([]whatif.GPU, 0, len(hist))
	for _, h := range hist {
		out = append(out, whatif.GPU{Node: h.Node, Index: h.GPUIndex, MemMiB: h.MemMiB})
	}
	for _, p := range placements {
		out = append(out, whatif.ParsePlacement(p)...)
	}
	return out, nil
}

// WhatIfTeams returns the teams, with their guarantees, weights and caps
// per user, as the replay takes them.
func (s *Store) WhatIfTeams(ctx context.Context) ([]trace.Team, error) {
	ts, err := s.Teams(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]trace.Team, len(ts))
	for i, t := range ts {
		out[i] = trace.Team{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, Weight: t.Weight, MaxGPUsPerUser: t.MaxGPUsPerUser}
	}
	return out, nil
}
