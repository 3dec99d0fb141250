// Package estimate predicts when waiting jobs will start, from nothing
// but what the cluster has seen: how long its jobs have run.
//
// The method: each running job is expected to run for its mean residual
// life, E[D - a | D > a], where D is a job's run time drawn from the
// cluster's completed jobs and a is the time the job has already run
// (jobs that have run long tend to run longer, which is what Tiresias
// relies on). Waiting jobs are then taken in the scheduler's priority
// order; each starts when enough GPUs have been released and holds them
// for the mean run time. The estimate ignores backfilling and future
// arrivals, so it errs late for small jobs and early under heavy load;
// the portal shows how far off past estimates were.
package estimate

import (
	"container/heap"
	"sort"
)

// Durations is an empirical distribution of run times, in seconds.
type Durations struct {
	sorted []float64
	suffix []float64 // suffix[i] = sum of sorted[i:]
}

// NewDurations builds the distribution of samples; non-positive samples
// are ignored.
func NewDurations(samples []float64) Durations {
	var d Durations
	for _, s := range samples {
		if s > 0 {
			d.sorted = append(d.sorted, s)
		}
	}
	sort.Float64s(d.sorted)
	d.suffix = make([]float64, len(d.sorted)+1)
	for i := len(d.sorted) - 1; i >= 0; i-- {
		d.suffix[i] = d.suffix[i+1] + d.sorted[i]
	}
	return d
}

// Len is the number of samples.
func (d Durations) Len() int { return len(d.sorted) }

// Mean is the mean run time; 0 without samples.
func (d Durations) Mean() float64 {
	if len(d.sorted) == 0 {
		return 0
	}
	return d.suffix[0] / float64(len(d.sorted))
}

// Residual is the expected remaining run time of a job that has run for
// a seconds: E[D - a | D > a]. When no sample ran longer, the job is
// expected to run half as long again as it has.
func (d Durations) Residual(a float64) float64 {
	i := sort.Search(len(d.sorted), func(i int) bool { return d.sorted[i] > a })
	n := len(d.sorted) - i
	if n == 0 {
		return a / 2
	}
	return d.suffix[i]/float64(n) - a
}

// Running is a job that holds GPUs now.
type Running struct {
	GPUs      int
	ExecutedS float64
}

// Waiting is a job that waits, in the scheduler's priority order.
type Waiting struct {
	ID   int64
	GPUs int
}

// Starts estimates the start time of each waiting job, in the caller's
// seconds. Jobs that can never fit get none.
func Starts(now float64, totalGPUs int, running []Running, waiting []Waiting, d Durations) map[int64]float64 {
	out := make(map[int64]float64, len(waiting))
	free := totalGPUs
	var releases releaseHeap
	for _, r := range running {
		free -= r.GPUs
		heap.Push(&releases, release{at: now + d.Residual(r.ExecutedS), gpus: r.GPUs})
	}
	t := now
	mean := d.Mean()
	for _, w := range waiting {
		if w.GPUs <= 0 || w.GPUs > totalGPUs {
			continue
		}
		for free < w.GPUs && releases.Len() > 0 {
			r := heap.Pop(&releases).(release)
			t = max(t, r.at)
			free += r.gpus
		}
		if free < w.GPUs {
			continue
		}
		out[w.ID] = t
		free -= w.GPUs
		heap.Push(&releases, release{at: t + mean, gpus: w.GPUs})
	}
	return out
}

type release struct {
	at   float64
	gpus int
}

type releaseHeap []release

func (h releaseHeap) Len() int           { return len(h) }
func (h releaseHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h releaseHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *releaseHeap) Push(x any)        { *h = append(*h, x.(release)) }
func (h *releaseHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
