// Package gpuhist is a GPU's history in buckets of time: one GPU's
// readings over a minute or an hour (Aggregate), how two buckets of the
// same GPU merge, and how minutes roll up into hours. The telemetry
// downsampler makes these buckets and the store keeps them as rows; it is
// a leaf, so that the store needs no telemetry.
package gpuhist

import (
	"sort"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// Aggregate is one GPU's readings over one bucket of time (a minute, an
// hour): what the database keeps once the per-second points are gone.
type Aggregate struct {
	GPU   gpu.Ref
	Start int64 // Unix seconds, a multiple of Step
	Step  int64 // the bucket's length in seconds
	// Samples is how many per-second readings the bucket holds.
	Samples       int
	MemMiB        int64
	MemUsedAvgMiB float64
	MemUsedMaxMiB int64
	UtilAvgPct    float64
	// BusySamples counts the readings taken while jobs were placed on the
	// GPU (Point.Busy).
	BusySamples int
	// PowerAvgW and TempAvgC average the readings that had them;
	// PowerSamples and TempSamples count those readings (0: unknown).
	PowerAvgW    float64
	PowerSamples int
	TempAvgC     float64
	TempSamples  int
}

// End is the first second after the bucket.
func (a Aggregate) End() int64 { return a.Start + a.Step }

// Merge combines b into a: both describe the same GPU, and the result
// covers the samples of both.
func (a Aggregate) Merge(b Aggregate) Aggregate {
	out := a
	out.Samples = a.Samples + b.Samples
	out.MemMiB = max(a.MemMiB, b.MemMiB)
	out.MemUsedAvgMiB = weighted(a.MemUsedAvgMiB, a.Samples, b.MemUsedAvgMiB, b.Samples)
	out.MemUsedMaxMiB = max(a.MemUsedMaxMiB, b.MemUsedMaxMiB)
	out.UtilAvgPct = weighted(a.UtilAvgPct, a.Samples, b.UtilAvgPct, b.Samples)
	out.BusySamples = a.BusySamples + b.BusySamples
	out.PowerAvgW = weighted(a.PowerAvgW, a.PowerSamples, b.PowerAvgW, b.PowerSamples)
	out.PowerSamples = a.PowerSamples + b.PowerSamples
	out.TempAvgC = weighted(a.TempAvgC, a.TempSamples, b.TempAvgC, b.TempSamples)
	out.TempSamples = a.TempSamples + b.TempSamples
	return out
}

func weighted(x float64, nx int, y float64, ny int) float64 {
	if nx+ny == 0 {
		return 0
	}
	return (x*float64(nx) + y*float64(ny)) / float64(nx+ny)
}

// Bucket is the start of the step-second bucket holding t.
func Bucket(t, step int64) int64 {
	b := t - t%step
	if t < 0 && t%step != 0 {
		b -= step
	}
	return b
}

// Rollup combines aggregates into buckets of step seconds per GPU: an
// hour from its minutes, or five minutes for a chart. Aggregates already
// as long as step or longer pass unchanged. The result is ordered by GPU,
// then time.
func Rollup(in []Aggregate, step int64) []Aggregate {
	type key struct {
		gpu   gpu.Ref
		start int64
	}
	acc := make(map[key]Aggregate)
	var order []key
	for _, a := range in {
		if a.Step >= step {
			k := key{a.GPU, a.Start}
			if _, ok := acc[k]; !ok {
				order = append(order, k)
				acc[k] = a
			} else {
				acc[k] = acc[k].Merge(a)
			}
			continue
		}
		k := key{a.GPU, Bucket(a.Start, step)}
		cur, ok := acc[k]
		if !ok {
			order = append(order, k)
			a.Start, a.Step = k.start, step
			acc[k] = a
			continue
		}
		acc[k] = cur.Merge(a)
	}
	out := make([]Aggregate, 0, len(order))
	for _, k := range order {
		out = append(out, acc[k])
	}
	Sort(out)
	return out
}

// Sort orders aggregates by GPU (node, index), then by start.
func Sort(as []Aggregate) {
	sort.Slice(as, func(i, j int) bool {
		a, b := as[i], as[j]
		if a.GPU.Node != b.GPU.Node {
			return a.GPU.Node < b.GPU.Node
		}
		if a.GPU.Index != b.GPU.Index {
			return a.GPU.Index < b.GPU.Index
		}
		return a.Start < b.Start
	})
}
