package models

import (
	"context"
	"fmt"

	"github.com/gpuportal/gpuportal/core/memest"
)

// SetMeasuredMemory stores a sharing job's memory estimate as the agent's
// gate measured it during a run (unpadded, source measured), so that its
// next run, after a preemption or a retry, starts from it. It changes
// nothing else and records no event.
func (s *Store) SetMeasuredMemory(ctx context.Context, id int64, est memest.Estimate) error {
	res := s.db.WithContext(ctx).Model(&Job{}).Where("id = ?", id).
		Select("MemPersistentMiB", "MemEphemeralMiB", "MemSource").
		Updates(&Job{MemPersistentMiB: est.PersistentMiB, MemEphemeralMiB: est.EphemeralMiB, MemSource: string(est.Source)})
	if res.Error != nil {
		return fmt.Errorf("store measured memory of job %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("store measured memory of job %d: %w", id, ErrNotFound)
	}
	return nil
}
