package salussim

import (
	"math"

	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/trace"
)

// The model's pieces that core/sim reuses for `gpuportal sim --sharing
// salus`, so that both simulators share one model of memory and speed.

// Fractional reports whether a job asks for part of one GPU (one GPU,
// gpu_milli below 1,000): the jobs that salus mode shares.
func Fractional(j trace.Job) bool { return fractional(j) }

// Memory derives a fractional job's memory before padding: gpu_milli /
// 1,000 of a GPU of gpuMemMiB, persistentShare of it persistent (0 means
// memest.DefaultPersistentShare), the rest ephemeral.
func Memory(j trace.Job, gpuMemMiB int64, persistentShare float64) memest.Estimate {
	if persistentShare == 0 {
		persistentShare = memest.DefaultPersistentShare
	}
	total := float64(j.GPUMilli) / 1000 * float64(gpuMemMiB)
	p := int64(math.Round(total * persistentShare))
	return memest.Estimate{PersistentMiB: p, EphemeralMiB: int64(math.Round(total)) - p, Source: memest.Declared}
}

// Rate is the speed of each running iteration on a GPU: the iterations
// share its compute, at full speed while their demands (gpu_milli/1,000
// each) sum to at most one GPU and in proportion beyond; a GPU hosting
// more than one job also loses the slowdown fraction to switching and
// interference.
func Rate(demand float64, hosted int, slowdown float64) float64 {
	rate := 1.0
	if demand > 1 {
		rate = 1 / demand
	}
	if hosted > 1 {
		rate *= 1 - slowdown
	}
	return rate
}
