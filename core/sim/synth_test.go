package sim

import (
	"math"
	"math/rand/v2"

	"github.com/gpuportal/gpuportal/core/trace"
)

// synthetic makes a reproducible trace of n jobs that keeps a cluster of
// gpus GPUs about load busy: Poisson arrivals, log-normal durations
// (median 10 minutes, mean about 72 minutes once capped at 30 days) and
// 1, 2, 4 or 8 GPUs per job.
func synthetic(n, gpus int, load float64, seed uint64) []trace.Job {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	sizes := []struct {
		gpus int
		p    float64
	}{{1, 0.6}, {2, 0.15}, {4, 0.15}, {8, 0.1}}
	const median, sigma = 600.0, 2.0
	meanGPUs := 0.0
	for _, s := range sizes {
		meanGPUs += float64(s.gpus) * s.p
	}
	meanDur := median * math.Exp(sigma*sigma/2)
	rate := load * float64(gpus) / (meanGPUs * meanDur) // jobs per second
	jobs := make([]trace.Job, n)
	t := 0.0
	for i := range jobs {
		t += math.Round(r.ExpFloat64() / rate)
		d := math.Round(median * math.Exp(sigma*r.NormFloat64()))
		d = min(max(d, 10), 30*86400)
		g, u := 8, r.Float64()
		for _, s := range sizes {
			if u < s.p {
				g = s.gpus
				break
			}
			u -= s.p
		}
		jobs[i] = trace.Job{ID: int64(i), Submit: t, Duration: d, GPUs: g, GPUMilli: 1000}
	}
	return jobs
}
