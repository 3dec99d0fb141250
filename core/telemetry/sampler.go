package telemetry

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// Source is a machine whose GPUs can be sampled.
type Source interface {
	Name() string
	Sample(now time.Time) []gpu.Sample
}

// Run samples every source each interval until ctx ends.
func (r *Recorder) Run(ctx context.Context, sources func() []Source, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	now := time.Now()
	for {
		for _, s := range sources() {
			r.Record(s.Name(), s.Sample(now))
		}
		select {
		case <-ctx.Done():
			return
		case now = <-tick.C:
		}
	}
}
