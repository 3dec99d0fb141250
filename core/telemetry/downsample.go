package telemetry

import (
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/gpuhist"
)

// Aggregate is one GPU's readings over one bucket of time
// (gpuhist.Aggregate), as the Downsampler makes them.
type Aggregate = gpuhist.Aggregate

// fromPoint is one reading as an aggregate of one sample.
func fromPoint(k gpu.Ref, start, step int64, s Point) Aggregate {
	a := Aggregate{GPU: k, Start: start, Step: step, Samples: 1, MemMiB: s.MemMiB,
		MemUsedAvgMiB: float64(s.MemUsedMiB), MemUsedMaxMiB: s.MemUsedMiB, UtilAvgPct: s.UtilPct}
	if s.Busy() {
		a.BusySamples = 1
	}
	if s.PowerW > 0 {
		a.PowerAvgW, a.PowerSamples = s.PowerW, 1
	}
	if s.TempC > 0 {
		a.TempAvgC, a.TempSamples = float64(s.TempC), 1
	}
	return a
}

// Downsampler folds per-second readings into per-GPU buckets of Step
// seconds and hands back each bucket once a later reading shows it is
// complete. It is not safe for concurrent use.
type Downsampler struct {
	step int64
	open map[gpu.Ref]Aggregate
}

// NewDownsampler makes buckets of step seconds (at least 1).
func NewDownsampler(step int64) *Downsampler {
	return &Downsampler{step: max(1, step), open: make(map[gpu.Ref]Aggregate)}
}

// AddFrame folds in a frame of the Recorder and returns the buckets it
// closed. Readings older than a GPU's open bucket are dropped: time only
// moves on.
func (d *Downsampler) AddFrame(f Frame) []Aggregate {
	var done []Aggregate
	for _, g := range f.GPUs {
		k := g.Ref
		start := gpuhist.Bucket(g.T, d.step)
		a, ok := d.open[k]
		switch {
		case !ok:
			d.open[k] = fromPoint(k, start, d.step, g.Point)
		case start == a.Start:
			d.open[k] = a.Merge(fromPoint(k, start, d.step, g.Point))
		case start > a.Start:
			done = append(done, a)
			d.open[k] = fromPoint(k, start, d.step, g.Point)
		}
	}
	gpuhist.Sort(done)
	return done
}

// Flush returns every open bucket, complete or not, and forgets them.
func (d *Downsampler) Flush() []Aggregate {
	out := make([]Aggregate, 0, len(d.open))
	for _, a := range d.open {
		out = append(out, a)
	}
	clear(d.open)
	gpuhist.Sort(out)
	return out
}
