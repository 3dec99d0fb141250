package models

import (
	"context"
	"fmt"
)

// RunningPlacements returns where each running job runs ("node:index"
// per GPU), by job: the scheduler's allocation, as the GPU history marks
// GPUs busy with it. It reads only running jobs (indexed by state), so it
// stays cheap under a long queue.
func (s *Store) RunningPlacements(ctx context.Context) (map[int64][]string, error) {
	var rows []struct {
		ID        int64
		Placement Strings
	}
	err := s.db.WithContext(ctx).Model(&Job{}).Select("id, placement").Where("state = ?", JobRunning).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list running jobs' placements: %w", err)
	}
	out := make(map[int64][]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Placement
	}
	return out, nil
}
