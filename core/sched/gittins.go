package sched

import (
	"cmp"
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
// indices. Each sample weighs 1, except in a distribution learnt with
// jobs still running (LearnGPUTimeDist). It is immutable: With returns a
// new one, so a distribution may be shared between passes and goroutines.
type GPUTimeDist struct {
	sorted  []float64
	weights []float64 // of each sample; nil: each weighs 1
	sufW    []float64 // sufW[i] = total weight of sorted[i:], len(sorted)+1 entries
	sufWS   []float64 // sufWS[i] = sum of weight x sample over sorted[i:]

	// hulls serve FullIndex, built on first use.
	hullOnce sync.Once
	hulls    hullTree
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

// With returns a new distribution holding d's samples and more, each of
// weight 1. A nil d is an empty distribution.
func (d *GPUTimeDist) With(more ...float64) *GPUTimeDist {
	add := NewGPUTimeDist(more)
	if d == nil {
		return add
	}
	out := &GPUTimeDist{sorted: make([]float64, 0, len(d.sorted)+len(add.sorted))}
	if d.weights != nil {
		out.weights = make([]float64, 0, cap(out.sorted))
	}
	a, b := d.sorted, add.sorted
	for k := 0; len(a) > 0 || len(b) > 0; {
		if len(b) == 0 || len(a) > 0 && a[0] <= b[0] {
			out.sorted, a = append(out.sorted, a[0]), a[1:]
			if out.weights != nil {
				out.weights = append(out.weights, d.weights[k])
			}
			k++
		} else {
			out.sorted, b = append(out.sorted, b[0]), b[1:]
			if out.weights != nil {
				out.weights = append(out.weights, 1)
			}
		}
	}
	out.sums()
	return out
}

// LearnGPUTimeDist is the distribution of job GPU-time learnt from done,
// the GPU-times of completed jobs (the shipped prior's among them), and
// running, the service attained so far by jobs not yet complete: each of
// those is only a lower bound of its job's GPU-time (right-censored).
// Learning from completed jobs alone would favour short jobs, the first
// to complete; the Kaplan-Meier estimator gives each censored job's
// weight to the samples above its service instead. The samples are the
// completed GPU-times, weighed by the estimator's jumps (scaled so that
// the weights add up to the number of jobs); where the largest values
// are censored, the weight left beyond the last completed one goes to the
// largest censored value (Efron's rule), so the distribution is proper.
// Without running jobs it is NewGPUTimeDist(done). Values that are
// negative or not finite are dropped.
func LearnGPUTimeDist(done, running []float64) *GPUTimeDist {
	type obs struct {
		v    float64
		done bool
	}
	all := make([]obs, 0, len(done)+len(running))
	for _, v := range done {
		if v >= 0 && !math.IsInf(v, 1) {
			all = append(all, obs{v, true})
		}
	}
	censored := 0
	for _, v := range running {
		if v >= 0 && !math.IsInf(v, 1) {
			all = append(all, obs{v, false})
			censored++
		}
	}
	if censored == 0 {
		return NewGPUTimeDist(done)
	}
	// Completions before censorings at the same value: a job censored at
	// v was still running there.
	slices.SortFunc(all, func(a, b obs) int {
		if c := cmp.Compare(a.v, b.v); c != 0 {
			return c
		}
		switch {
		case a.done == b.done:
			return 0
		case a.done:
			return -1
		}
		return 1
	})
	n := float64(len(all))
	d := &GPUTimeDist{}
	surv, atRisk := 1.0, n
	for k := 0; k < len(all); {
		v, events, leaving := all[k].v, 0, 0
		for ; k < len(all) && all[k].v == v; k++ {
			if all[k].done {
				events++
			}
			leaving++
		}
		if events > 0 {
			jump := surv * float64(events) / atRisk
			surv -= jump
			d.sorted = append(d.sorted, v)
			d.weights = append(d.weights, jump*n)
		}
		atRisk -= float64(leaving)
	}
	if last := all[len(all)-1]; !last.done && surv > 0 {
		d.sorted = append(d.sorted, last.v)
		d.weights = append(d.weights, surv*n)
	}
	d.sums()
	return d
}

func (d *GPUTimeDist) sums() {
	n := len(d.sorted)
	d.sufW, d.sufWS = make([]float64, n+1), make([]float64, n+1)
	for i := n - 1; i >= 0; i-- {
		w := 1.0
		if d.weights != nil {
			w = d.weights[i]
		}
		d.sufW[i] = d.sufW[i+1] + w
		d.sufWS[i] = d.sufWS[i+1] + w*d.sorted[i]
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
	left := d.sufW[i]
	within := d.sufW[i] - d.sufW[j]
	p := within / left
	// E[min(S-a, delta)] over the samples above a: the ones that end
	// within the quantum contribute S-a, the others delta.
	e := (d.sufWS[i] - d.sufWS[j] - within*a + d.sufW[j]*delta) / left
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
// on a sample. Unlike Index with a fixed quantum, the index of a job that
// has outlived all but a few samples stays positive, and rises as the
// job nears the largest; a job that has outlived every sample, or an
// empty distribution, gets 0. It costs O(log^2 n) for n samples
// (hullTree); fullIndexScan is the same in one pass over the samples.
func (d *GPUTimeDist) FullIndex(a float64) float64 {
	if d == nil || len(d.sorted) == 0 || math.IsNaN(a) {
		return 0
	}
	i := upperBound(d.sorted, a)
	if i == len(d.sorted) {
		return 0
	}
	d.hullOnce.Do(d.buildHulls)
	j := d.hulls.best(d.sufW[0]-d.sufW[i], d.fullX(i, a), i)
	return d.fullRatio(i, j, a)
}

// fullIndexScan is FullIndex by trying every sample above a as the end of
// the quantum.
func (d *GPUTimeDist) fullIndexScan(a float64) float64 {
	if d == nil || len(d.sorted) == 0 || math.IsNaN(a) {
		return 0
	}
	best := 0.0
	for j := upperBound(d.sorted, a); j < len(d.sorted); j++ {
		best = max(best, d.fullRatio(upperBound(d.sorted, a), j, a))
	}
	return best
}

// fullRatio is the index for a job above samples[:i] (the first i are at
// most a) and the quantum that ends at sample j >= i: of the samples
// above a, those up to j end within it (with ties, up to the last equal
// one); the expected service sums S-a over those and the quantum over the
// rest, each by its weight. The common factor, the weight above a,
// cancels.
func (d *GPUTimeDist) fullRatio(i, j int, a float64) float64 {
	s, n := d.sorted, len(d.sorted)
	for j+1 < n && s[j+1] == s[j] {
		j++
	}
	done := d.sufW[i] - d.sufW[j+1]
	e := d.sufWS[i] - d.sufWS[j+1] - done*a + d.sufW[j+1]*(s[j]-a)
	if !(e > 0) {
		return 0
	}
	return done / e
}

// The full index as a geometric query. With W_j the weight of
// sorted[:j] and C_j = sum(w x sorted over [:j+1]) + (W_n - W_j+1) x
// sorted[j], the ratio for the quantum ending at sample j is
//
//	(W_j+1 - W_i) / (C_j - X),  X = sum(w x sorted over [:i]) + a x (W_n - W_i),
//
// the slope from the point (X, W_i) to the point (C_j, W_j+1). C_j never
// falls as j grows, and X < C_j for every j >= i, so the best j is where
// the line from (X, W_i) touches the upper convex hull of the points
// j >= i: a suffix of a fixed set. hullTree keeps the upper hull of every
// node of a segment tree over j; a suffix is O(log n) nodes, and along a
// hull the slope from the left rises then falls, so each node is one
// binary search. (With every weight 1, W_j is j.)

// fullX is X for a job above samples[:i] with service a.
func (d *GPUTimeDist) fullX(i int, a float64) float64 {
	return d.sufWS[0] - d.sufWS[i] + a*d.sufW[i]
}

func (d *GPUTimeDist) buildHulls() {
	s := d.sorted
	x, y := make([]float64, len(s)), make([]float64, len(s))
	for j := range s {
		x[j] = d.sufWS[0] - d.sufWS[j+1] + d.sufW[j+1]*s[j]
		y[j] = d.sufW[0] - d.sufW[j+1]
	}
	d.hulls.build(x, y)
}

// hullTree is a segment tree over the points (x[j], y[j]) whose nodes
// hold the indices of their range's upper convex hull, left to right.
type hullTree struct {
	x, y []float64
	size int     // leaves, a power of two
	node [][]int // node k covers a range; children 2k+1, 2k+2
}

func (h *hullTree) build(x, y []float64) {
	h.x, h.y = x, y
	h.size = 1
	for h.size < len(x) {
		h.size *= 2
	}
	h.node = make([][]int, 2*h.size-1)
	h.fill(0, 0, h.size)
}

func (h *hullTree) fill(k, lo, hi int) {
	if lo >= len(h.x) {
		return
	}
	if hi-lo == 1 {
		h.node[k] = []int{lo}
		return
	}
	mid := (lo + hi) / 2
	h.fill(2*k+1, lo, mid)
	h.fill(2*k+2, mid, hi)
	var hull []int
	for _, j := range append(append([]int(nil), h.node[2*k+1]...), h.node[2*k+2]...) {
		for len(hull) > 0 && h.x[hull[len(hull)-1]] == h.x[j] {
			hull = hull[:len(hull)-1] // same x: the later is higher
		}
		for len(hull) >= 2 && h.cross(hull[len(hull)-2], hull[len(hull)-1], j) >= 0 {
			hull = hull[:len(hull)-1]
		}
		hull = append(hull, j)
	}
	h.node[k] = hull
}

// cross is the turn o -> p -> q of the points of o, p, q: positive to the
// left.
func (h *hullTree) cross(o, p, q int) float64 {
	return (h.x[p]-h.x[o])*(h.y[q]-h.y[o]) - (h.y[p]-h.y[o])*(h.x[q]-h.x[o])
}

// best returns the j >= i whose point has the steepest slope from
// (qx, qy), which lies left of all of them.
func (h *hullTree) best(qy, qx float64, i int) int {
	bestJ, bestNum, bestDen := -1, 0.0, 1.0
	h.query(0, 0, h.size, i, qx, qy, func(j int) {
		num, den := h.y[j]-qy, h.x[j]-qx
		if bestJ < 0 || num*bestDen > bestNum*den {
			bestJ, bestNum, bestDen = j, num, den
		}
	})
	return bestJ
}

func (h *hullTree) query(k, lo, hi, i int, qx, qy float64, see func(int)) {
	if hi <= i || lo >= len(h.x) {
		return
	}
	if lo >= i {
		see(h.tangent(h.node[k], qy, qx))
		return
	}
	mid := (lo + hi) / 2
	h.query(2*k+1, lo, mid, i, qx, qy, see)
	h.query(2*k+2, mid, hi, i, qx, qy, see)
}

// tangent returns the vertex of hull with the steepest slope from
// (qx, qy): the first whose next vertex is no steeper.
func (h *hullTree) tangent(hull []int, qy, qx float64) int {
	steeper := func(a, b int) bool { // the slope to b beats the slope to a
		return (h.y[b]-qy)*(h.x[a]-qx) > (h.y[a]-qy)*(h.x[b]-qx)
	}
	lo, hi := 0, len(hull)-1
	for lo < hi {
		m := (lo + hi) / 2
		if steeper(hull[m], hull[m+1]) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return hull[lo]
}

// ReferenceIndex is the Gittins index as the Tiresias authors' simulator
// computes it (run_sim.py, cal_r_gittins_index and get_gittins_index),
// for a job that has attained a GPU-seconds with quantum delta. It is
// tabulated at the samples: for each sample v, the index at v-1, with
//
//	P = (#samples in (a, a+delta]) / #samples > a
//	E = (sum of those samples + delta x #samples > a+delta) / #samples > a
//
// where the sum is of whole GPU-times S rather than S - a (each sample
// counted once, whatever its weight), E is divided
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
		e := roundTo(math.Floor((d.sufWS[i]-d.sufWS[j]+delta*float64(n-j))/left), 5)
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
