package synergy

import (
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// MeasuredCurve turns the steps of an agent's CPU profiling (quotas
// ascending) into a CPU curve for a job with gpus GPUs: X in cores per
// GPU, speed relative to the fastest step. The curve starts at (0, 0) and
// rises linearly to the first step (nothing below the proportional share
// was measured, so Allocate never takes the job below it), and
// measurement noise is smoothed into a non-decreasing curve.
func MeasuredCurve(points []job.ProfilePoint, gpus int) Curve {
	if len(points) == 0 {
		return nil
	}
	best := 0.0
	for _, pt := range points {
		best = max(best, pt.Rate)
	}
	if best <= 0 {
		return nil
	}
	g := float64(max(gpus, 1))
	c := Curve{{X: 0, Speed: 0}}
	top := 0.0
	for _, pt := range points {
		top = max(top, pt.Rate/best)
		c = append(c, Point{X: float64(pt.CPUMilli) / 1000 / g, Speed: top})
	}
	return c
}

// LearnedProfile is a profile measured by an agent's profiling phase, of
// Model at batch size Batch: the engine records it in a History, and a
// store keeps it across restarts.
type LearnedProfile struct {
	Model   string
	Batch   int
	Profile Profile
	JobID   int64
	At      time.Time
}
