package enginestore

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
)

func (s *rowCounter) MarkStartedAll(ctx context.Context, starts []engine.StartRecord, now time.Time) ([]int64, []error, error) {
	s.rows.Add(int64(len(starts)))
	return s.Store.MarkStartedAll(ctx, starts, now)
}
