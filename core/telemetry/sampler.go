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

// Holders returns the jobs placed on each GPU now (running jobs'
// placements), to mark the readings taken at the same time busy.
type Holders func(ctx context.Context) (map[gpu.Ref][]int64, error)

// Run samples every source each interval until ctx ends. held, when not
// nil, tells which jobs hold each GPU at each tick; when it fails, that
// tick's readings carry no holders and the error goes to onErr.
func (r *Recorder) Run(ctx context.Context, sources func() []Source, held Holders, interval time.Duration, onErr func(error)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	now := time.Now()
	for {
		var hs map[gpu.Ref][]int64
		if held != nil {
			var err error
			if hs, err = held(ctx); err != nil && ctx.Err() == nil && onErr != nil {
				onErr(err)
			}
		}
		for _, s := range sources() {
			r.RecordHeld(s.Name(), s.Sample(now), hs)
		}
		select {
		case <-ctx.Done():
			return
		case now = <-tick.C:
		}
	}
}
