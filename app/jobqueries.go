package app

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

// The reads of jobs: one job, a page of the jobs list, its history, the
// figures around them (moment.go), each within what the actor may see.

// JobReadStore is what the reads of jobs, queues and forecasts read of
// the store; *models.Store is one.
type JobReadStore interface {
	RunningJobs(ctx context.Context) ([]models.Job, error)
	QueueRows(ctx context.Context) ([]models.QueueRow, error)
	LatestForecasts(ctx context.Context) (map[int64]models.Forecast, error)
	LatestForecastsOf(ctx context.Context, ids []int64) (map[int64]models.Forecast, error)
	JobsByID(ctx context.Context, ids []int64) ([]models.Job, error)
	JCTsSince(ctx context.Context, since time.Time, limit int) ([]float64, error)
	ForecastOutcomes(ctx context.Context, kind string, limit int) ([]models.ForecastOutcome, error)
}
