package telemetry

import (
	"sort"
)

// Aggregate is one GPU's readings over one bucket of time (a minute, an
// hour): what the database keeps once the per-second points are gone.
type Aggregate struct {
	GPU   GPUKey
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

// fromPoint is one reading as an aggregate of one sample.
func fromPoint(k GPUKey, start, step int64, s Point) Aggregate {
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

// bucket is the start of the step-second bucket holding t.
func bucket(t, step int64) int64 {
	b := t - t%step
	if t < 0 && t%step != 0 {
		b -= step
	}
	return b
}

// Downsampler folds per-second readings into per-GPU buckets of Step
// seconds and hands back each bucket once a later reading shows it is
// complete. It is not safe for concurrent use.
type Downsampler struct {
	step int64
	open map[GPUKey]Aggregate
}

// NewDownsampler makes buckets of step seconds (at least 1).
func NewDownsampler(step int64) *Downsampler {
	return &Downsampler{step: max(1, step), open: make(map[GPUKey]Aggregate)}
}

// AddFrame folds in a frame of the Recorder and returns the buckets it
// closed. Readings older than a GPU's open bucket are dropped: time only
// moves on.
func (d *Downsampler) AddFrame(f Frame) []Aggregate {
	var done []Aggregate
	for _, g := range f.GPUs {
		k := g.GPUKey
		start := bucket(g.T, d.step)
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
	sortAggregates(done)
	return done
}

// Flush returns every open bucket, complete or not, and forgets them.
func (d *Downsampler) Flush() []Aggregate {
	out := make([]Aggregate, 0, len(d.open))
	for _, a := range d.open {
		out = append(out, a)
	}
	clear(d.open)
	sortAggregates(out)
	return out
}

// Rollup combines aggregates into buckets of step seconds per GPU: an
// hour from its minutes, or five minutes for a chart. Aggregates already
// as long as step or longer pass unchanged. The result is ordered by GPU,
// then time.
func Rollup(in []Aggregate, step int64) []Aggregate {
	type key struct {
		gpu   GPUKey
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
		k := key{a.GPU, bucket(a.Start, step)}
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
	sortAggregates(out)
	return out
}

func sortAggregates(as []Aggregate) {
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
