package models

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// SetKeepAlive records that running job id is kept alive, though idle,
// until until. ErrConflict: the job is not running (any more).
func (s *Store) SetKeepAlive(ctx context.Context, id int64, until time.Time) error {
	res := s.db.WithContext(ctx).Model(&Job{}).Where("id = ? AND state = ?", id, job.Running).Update("keep_alive_until", until)
	if res.Error != nil {
		return fmt.Errorf("keep job %d alive: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("keep job %d alive: %w", id, ErrConflict)
	}
	return nil
}
