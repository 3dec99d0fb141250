package sched

import (
	_ "embed"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// yarnGPUTime is the prior of tiresias-g: 1,001 job GPU-times (GPU-seconds)
// from a production YARN cluster, as shipped with the Tiresias simulator
// (SymbioticLab/Tiresias, simulator/yarn-gput1000.csv).
//
//go:embed data/yarn-gput1000.csv
var yarnGPUTime string

// GPUTimeDist is an empirical distribution of job GPU-time (GPUs x run
// seconds of completed jobs), from which tiresias-g computes Gittins
// indices. It is immutable: With returns a new one, so a distribution may
// be shared between passes and goroutines.
type GPUTimeDist struct {
	sorted []float64
	suffix []float64 // suffix[i] = sum(sorted[i:]), len(sorted)+1 entries
}

var (
	priorOnce sync.Once
	prior     *GPUTimeDist
)

// PriorGPUTimeDist returns the built-in prior: the YARN cluster's job
// GPU-times the Tiresias authors used.
func PriorGPUTimeDist() *GPUTimeDist {
	priorOnce.Do(func() { prior = NewGPUTimeDist(PriorGPUTime()) })
	return prior
}

// PriorGPUTime returns the samples of the built-in prior, in the order of
// the source file.
func PriorGPUTime() []float64 {
	var out []float64
	for _, line := range strings.Split(yarnGPUTime, "\n") {
		line = strings.TrimSpace(line)
		if v, err := strconv.ParseFloat(line, 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// NewGPUTimeDist builds a distribution from samples, dropping those that
// are negative or not finite.
func NewGPUTimeDist(samples []float64) *GPUTimeDist {
	d := &GPUTimeDist{sorted: make([]float64, 0, len(samples))}
	for _, v := range samples {
		if v >= 0 && !math.IsInf(v, 1) {
			d.sorted = append(d.sorted, v)
		}
	}
	slices.Sort(d.sorted)
	d.sums()
	return d
}

// With returns a new distribution holding d's samples and more. A nil d
// is an empty distribution.
func (d *GPUTimeDist) With(more ...float64) *GPUTimeDist {
	add := NewGPUTimeDist(more)
	if d == nil {
		return add
	}
	out := &GPUTimeDist{sorted: make([]float64, 0, len(d.sorted)+len(add.sorted))}
	a, b := d.sorted, add.sorted
	for len(a) > 0 && len(b) > 0 {
		if a[0] <= b[0] {
			out.sorted, a = append(out.sorted, a[0]), a[1:]
		} else {
			out.sorted, b = append(out.sorted, b[0]), b[1:]
		}
	}
	out.sorted = append(append(out.sorted, a...), b...)
	out.sums()
	return out
}

func (d *GPUTimeDist) sums() {
	d.suffix = make([]float64, len(d.sorted)+1)
	for i := len(d.sorted) - 1; i >= 0; i-- {
		d.suffix[i] = d.suffix[i+1] + d.sorted[i]
	}
}

// Len is the number of samples.
func (d *GPUTimeDist) Len() int {
	if d == nil {
		return 0
	}
	return len(d.sorted)
}

// Index is the Gittins index of a job that has attained a GPU-seconds of
// service, for a service quantum delta:
//
//	P(S - a <= delta | S > a) / E[min(S - a, delta) | S > a]
//
// where S is a job's total GPU-time drawn from the distribution. It is the
// rate at which one more quantum of service is expected to complete the
// job; a higher index means a higher priority. A job that has outlived
// every sample, or an empty distribution, gets 0.
func (d *GPUTimeDist) Index(a, delta float64) float64 {
	if d == nil || len(d.sorted) == 0 || !(delta > 0) || math.IsNaN(a) {
		return 0
	}
	i := upperBound(d.sorted, a)
	n := len(d.sorted)
	if i == n {
		return 0
	}
	j := upperBound(d.sorted, a+delta)
	left := float64(n - i)
	p := float64(j-i) / left
	// E[min(S-a, delta)] over the samples above a: the ones that end
	// within the quantum contribute S-a, the others delta.
	e := (d.suffix[i] - d.suffix[j] - float64(j-i)*a + float64(n-j)*delta) / left
	if !(e > 0) {
		return 0
	}
	return p / e
}

// upperBound returns the index of the first element of sorted greater
// than v.
func upperBound(sorted []float64, v float64) int {
	lo, hi := 0, len(sorted)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if sorted[m] <= v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// FullIndex is the Gittins index of a job that has attained a GPU-seconds
// of service, best over every quantum:
//
//	sup over delta > 0 of P(S - a <= delta | S > a) / E[min(S - a, delta) | S > a]
//
// Between two samples the ratio falls as delta grows (the chance of
// finishing stays, the expected service grows), so the best quantum ends
// on a sample: it is found in one pass over the samples above a. Unlike
// Index with a fixed quantum, the index of a job that has outlived all
// but a few samples stays positive, and rises as the job nears the
// largest; a job that has outlived every sample, or an empty
// distribution, gets 0.
func (d *GPUTimeDist) FullIndex(a float64) float64 {
	if d == nil || len(d.sorted) == 0 || math.IsNaN(a) {
		return 0
	}
	s := d.sorted
	n := len(s)
	i := upperBound(s, a)
	best := 0.0
	for j := i; j < n; j++ {
		if j+1 < n && s[j+1] == s[j] {
			continue // the quantum s[j]-a ends every sample equal to s[j]
		}
		// Over the n-i samples above a: j-i+1 end within the quantum;
		// the expected service sums S-a over those and the quantum over
		// the rest. The common factor 1/(n-i) cancels.
		done := float64(j - i + 1)
		e := d.suffix[i] - d.suffix[j+1] - done*a + float64(n-1-j)*(s[j]-a)
		if e > 0 && done > best*e {
			best = done / e
		}
	}
	return best
}

// ReferenceIndex is the Gittins index as the Tiresias authors' simulator
// computes it (run_sim.py, cal_r_gittins_index and get_gittins_index),
// for a job that has attained a GPU-seconds with quantum delta. It is
// tabulated at the samples: for each sample v, the index at v-1, with
//
//	P = (#samples in (a, a+delta]) / #samples > a
//	E = (sum of those samples + delta x #samples > a+delta) / #samples > a
//
// where the sum is of whole GPU-times S rather than S - a, E is divided
// as integers (rounded down, as Python 2 divides), P and E are rounded
// to 5 decimals and P/E to 4 (after scaling by 10^6), and the last
// sample never counts as finishing. A job gets the entry of the first
// sample above its service; beyond the largest, 0. So the index falls
// with service in steps, and stays positive in the sparse tail. It is
// returned per GPU-second, as Index is (the reference's is per 10^6).
func (d *GPUTimeDist) ReferenceIndex(a, delta float64) float64 {
	t := d.referenceTable(delta)
	return t.lookup(a)
}

// referenceTable is ReferenceIndex at every sample: gi[k] for a job whose
// service is below sorted[k] and not below sorted[k-1].
type referenceTable struct {
	sorted []float64
	gi     []float64
}

func (d *GPUTimeDist) referenceTable(delta float64) referenceTable {
	if d == nil || len(d.sorted) == 0 || !(delta > 0) {
		return referenceTable{}
	}
	s := d.sorted
	n := len(s)
	t := referenceTable{sorted: s, gi: make([]float64, n)}
	for k, v := range s {
		a := math.Trunc(v - 1)
		i := upperBound(s, a)
		j := n - 1 // beyond the largest sample but one: the last never finishes
		if a+delta <= s[n-1]-1 {
			j = upperBound(s, a+delta)
		}
		left := float64(n - i)
		p := roundTo(float64(j-i)/left, 5)
		e := roundTo(math.Floor((d.suffix[i]-d.suffix[j]+delta*float64(n-j))/left), 5)
		if e > 0 {
			t.gi[k] = roundTo(p*1e6/e, 4)
		}
	}
	return t
}

func (t referenceTable) lookup(a float64) float64 {
	if len(t.sorted) == 0 || math.IsNaN(a) || a >= t.sorted[len(t.sorted)-1] {
		return 0
	}
	return t.gi[upperBound(t.sorted, a)] / 1e6
}

// roundTo rounds v to places decimals, correctly (as Python's round).
func roundTo(v float64, places int) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'f', places, 64), 64)
	if err != nil {
		return v
	}
	return r
}
