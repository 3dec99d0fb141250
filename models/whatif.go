package models

import (
	"context"
	"fmt"
	"time"
)

// JobsToReplay returns the jobs that succeeded or failed at or after
// since, having run, at most limit of them (the most recently finished
// first): what a what-if replay replays (app.WhatIfHistory turns them
// into core/whatif's records). Cancelled jobs are left out: they ran for
// as long as someone let them, not for the work they had.
func (s *Store) JobsToReplay(ctx context.Context, since time.Time, limit int) ([]Job, error) {
	var js []Job
	err := s.db.WithContext(ctx).
		Where("state IN ? AND finished_at >= ? AND started_at IS NOT NULL", []JobState{JobSucceeded, JobFailed}, since).
		Order("finished_at DESC, id DESC").Limit(limit).Find(&js).Error
	if err != nil {
		return nil, fmt.Errorf("jobs to replay since %s: %w", since.Format(time.RFC3339), err)
	}
	return js, nil
}

// GPUSeen is a GPU the history holds, with the most memory it had.
type GPUSeen struct {
	Node     string `gorm:"column:node"`
	GPUIndex int    `gorm:"column:gpu_index"`
	MemMiB   int64  `gorm:"column:mem_mib"`
}

// GPUsSeen returns the GPUs of the GPU history at or after since, with
// their memory, and the placements ("node:index,...") of the runs started
// since: together, the GPUs the cluster had.
func (s *Store) GPUsSeen(ctx context.Context, since time.Time) ([]GPUSeen, []string, error) {
	var hist []GPUSeen
	err := s.db.WithContext(ctx).Model(&GPUHistory{}).Select("node, gpu_index, MAX(mem_mib) AS mem_mib").
		Where("start >= ?", since.Unix()).Group("node, gpu_index").Scan(&hist).Error
	if err != nil {
		return nil, nil, fmt.Errorf("GPUs seen since %s: %w", since.Format(time.RFC3339), err)
	}
	var placements []string
	err = s.db.WithContext(ctx).Model(&Run{}).Distinct("placement").Where("started_at >= ?", since).Pluck("placement", &placements).Error
	if err != nil {
		return nil, nil, fmt.Errorf("GPUs of runs since %s: %w", since.Format(time.RFC3339), err)
	}
	return hist, placements, nil
}
