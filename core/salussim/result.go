package salussim

import (
	"math"
	"slices"
)

// Result is the outcome of one run. Times are seconds; utilizations are
// fractions of the cluster's GPU-time over the makespan.
type Result struct {
	Sharing Sharing
	Policy  string
	GPUs    int

	Jobs, Finished int
	// Fractional counts the jobs asking for part of one GPU, and Shared
	// those that ran in lanes (salus mode).
	Fractional, Shared int

	AvgJCTS, P50JCTS, P95JCTS float64
	// AvgJCTFractionalS and AvgJCTWholeS split AvgJCTS.
	AvgJCTFractionalS, AvgJCTWholeS float64
	// AvgQueueS is the mean wait from submit to first admission.
	AvgQueueS float64
	// AvgStretch is the mean of (finish - admission) / duration over the
	// fractional jobs with a positive duration: 1 when nothing slowed
	// them, more when lanes time-shared or compute was contended.
	AvgStretch float64
	MakespanS  float64

	// GPUUtilization is the GPU-time during which a GPU hosted at least
	// one job, over GPUs x makespan.
	GPUUtilization float64
	// ComputeUtilization is the compute the jobs used (gpu_milli/1000 x
	// duration for a fractional job, GPUs x duration for a whole one)
	// over GPUs x makespan.
	ComputeUtilization float64
	// JobsPerBusyGPU is the time-average number of jobs on a GPU while
	// it hosts any.
	JobsPerBusyGPU float64

	// Iterations granted, lane merges made to admit a job, and jobs
	// moved to lanes of their own by defragmentation.
	Iterations, Merges, Spreads int

	jcts, fracJCT, wholeJCT, queue, stretch []float64
	computeS, first, last                   float64
}

// add records a finished job.
func (r *Result) add(j *simJob, cfg Config) {
	jct := j.finish - j.t.Submit
	r.jcts = append(r.jcts, jct)
	r.queue = append(r.queue, j.admitted-j.t.Submit)
	if fractional(j.t) {
		r.fracJCT = append(r.fracJCT, jct)
		r.computeS += float64(j.t.GPUMilli) / 1000 * j.t.Duration
		if j.t.Duration > 0 {
			r.stretch = append(r.stretch, (j.finish-j.admitted)/j.t.Duration)
		}
	} else {
		r.wholeJCT = append(r.wholeJCT, jct)
		r.computeS += float64(j.t.GPUs) * j.t.Duration
	}
	if j.shared {
		r.Shared++
	}
	r.last = max(r.last, j.finish)
}

// result finishes the figures.
func (s *simulator) result() *Result {
	r := &s.res
	r.Sharing, r.Policy, r.GPUs = s.cfg.Sharing, string(s.cfg.Lanes.Policy), s.cfg.GPUs
	if r.Policy == "" {
		r.Policy = "pack"
	}
	r.Jobs = len(s.jobs)
	r.Finished = len(r.jcts)
	for _, j := range s.jobs {
		if fractional(j.t) {
			r.Fractional++
		}
	}
	if len(s.jobs) > 0 {
		r.first = s.jobs[0].t.Submit
	}
	r.AvgJCTS, r.AvgJCTFractionalS, r.AvgJCTWholeS = mean(r.jcts), mean(r.fracJCT), mean(r.wholeJCT)
	r.AvgQueueS, r.AvgStretch = mean(r.queue), mean(r.stretch)
	r.P50JCTS, r.P95JCTS = percentile(r.jcts, 0.50), percentile(r.jcts, 0.95)
	r.MakespanS = r.last - r.first
	if span := float64(s.cfg.GPUs) * r.MakespanS; span > 0 {
		r.GPUUtilization = s.busyS / span
		r.ComputeUtilization = r.computeS / span
	}
	if s.busyS > 0 {
		r.JobsPerBusyGPU = s.hostedS / s.busyS
	}
	return r
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// percentile is the nearest-rank percentile.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	k := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}
