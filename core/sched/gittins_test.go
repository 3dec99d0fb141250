package sched

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestGittinsIndex(t *testing.T) {
	d := NewGPUTimeDist([]float64{1000, 100, 200, math.NaN(), -5, math.Inf(1)})
	cases := []struct {
		name         string
		a, delta     float64
		want         float64
		wantComputed string
	}{
		{"no service yet", 0, 150, 1.0 / 400, "P=1/3, E=(100+150+150)/3"},
		{"past the first sample", 100, 150, 1.0 / 250, "P=1/2, E=(100+150)/2"},
		{"no sample ends within the quantum", 200, 150, 0, "P=0"},
		{"the last sample ends within the quantum", 900, 150, 1.0 / 100, "P=1, E=100"},
		{"outlived every sample", 1000, 150, 0, "no sample left"},
		{"a quantum covering all", 0, 1e9, 3.0 / 1300, "P=1, E=1300/3"},
	}
	for _, c := range cases {
		if got := d.Index(c.a, c.delta); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("%s: Index(%v, %v) = %v, want %v (%s)", c.name, c.a, c.delta, got, c.want, c.wantComputed)
		}
	}
	if d.Len() != 3 {
		t.Errorf("Len %d, want 3: NaN, negative and infinite samples are dropped", d.Len())
	}
}

func TestGittinsIndexEdges(t *testing.T) {
	var empty *GPUTimeDist
	if empty.Index(0, 100) != 0 || NewGPUTimeDist(nil).Index(0, 100) != 0 {
		t.Error("an empty distribution must give 0")
	}
	if NewGPUTimeDist([]float64{5}).Index(0, 0) != 0 {
		t.Error("a zero quantum must give 0")
	}
}

func TestGPUTimeDistWith(t *testing.T) {
	a := NewGPUTimeDist([]float64{3, 1})
	b := a.With(2, 4)
	if a.Len() != 2 || b.Len() != 4 {
		t.Fatalf("lens %d, %d; want 2, 4 (With must not change its receiver)", a.Len(), b.Len())
	}
	want := NewGPUTimeDist([]float64{1, 2, 3, 4})
	for _, x := range []float64{0, 1, 1.5, 2, 3.5} {
		if b.Index(x, 1.5) != want.Index(x, 1.5) {
			t.Errorf("Index(%v) differs after With", x)
		}
	}
	var none *GPUTimeDist
	if none.With(1).Len() != 1 {
		t.Error("With on nil")
	}
}

func TestPrior(t *testing.T) {
	p := PriorGPUTime()
	if len(p) != 1001 || p[0] != 121 {
		t.Fatalf("prior has %d samples starting %v, want 1001 starting 121", len(p), p[:1])
	}
	d := PriorGPUTimeDist()
	if d.Len() != 1001 || d.Index(0, DefaultGittinsQuantum) <= 0 {
		t.Errorf("prior distribution: %d samples, index at 0 = %v", d.Len(), d.Index(0, DefaultGittinsQuantum))
	}
}

// weighted builds a distribution from samples and their weights.
func weighted(samples, weights []float64) *GPUTimeDist {
	d := &GPUTimeDist{sorted: samples, weights: weights}
	d.sums()
	return d
}

// TestWeightedGPUTimeDist: a sample of weight k counts as k samples of
// weight 1, in Index and FullIndex (hull and scan), and the hull agrees
// with the scan under fractional weights.
func TestWeightedGPUTimeDist(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	for round := range 200 {
		n := 1 + rng.IntN(40)
		var samples, weights, repeated []float64
		v := 0.0
		for range n {
			v += float64(rng.IntN(3)) * (1 + rng.Float64()*100) // ties too
			k := 1 + rng.IntN(4)
			samples, weights = append(samples, v), append(weights, float64(k))
			for range k {
				repeated = append(repeated, v)
			}
		}
		w, r := weighted(samples, weights), NewGPUTimeDist(repeated)
		for range 20 {
			a := rng.Float64() * v * 1.1
			delta := 1 + rng.Float64()*v/2
			if got, want := w.Index(a, delta), r.Index(a, delta); math.Abs(got-want) > 1e-9*max(want, 1e-12) {
				t.Fatalf("round %d: Index(%v, %v) = %v weighted, %v repeated", round, a, delta, got, want)
			}
			if got, want := w.FullIndex(a), r.FullIndex(a); math.Abs(got-want) > 1e-9*max(want, 1e-12) {
				t.Fatalf("round %d: FullIndex(%v) = %v weighted, %v repeated", round, a, got, want)
			}
		}
		frac := make([]float64, n)
		for i := range frac {
			frac[i] = 0.05 + rng.Float64()*3
		}
		f := weighted(samples, frac)
		for range 20 {
			a := rng.Float64() * v
			if got, want := f.FullIndex(a), f.fullIndexScan(a); math.Abs(got-want) > 1e-9*max(want, 1e-12) {
				t.Fatalf("round %d: fractional weights: FullIndex(%v) = %v by the hull, %v by the scan", round, a, got, want)
			}
		}
	}
}

// TestLearnGPUTimeDist checks the Kaplan-Meier weights on cases worked
// by hand.
func TestLearnGPUTimeDist(t *testing.T) {
	tests := []struct {
		name          string
		done, running []float64
		samples, w    []float64
	}{
		// A job still running at 2 may end anywhere above 2: its weight
		// goes to 3, the only completion above it.
		{"a censored job's weight goes to the completions above it", []float64{1, 3}, []float64{2}, []float64{1, 3}, []float64{1, 2}},
		// Of five jobs, one ends at 1 (S = 4/5); at 4 two of the three
		// still at risk end (S falls by 4/5 x 2/3 = 8/15), and 9 takes
		// the last 4/15. Weights are those jumps times 5.
		{"ties", []float64{1, 4, 4, 9}, []float64{2}, []float64{1, 4, 9}, []float64{1, 8.0 / 3, 4.0 / 3}},
		// The largest is censored: what is left beyond 1 sits at 5.
		{"the largest censored holds the tail", []float64{1}, []float64{5, 7}, []float64{1, 7}, []float64{1, 2}},
		// Censored at a completion's value: it was still running there.
		{"completions before censorings at one value", []float64{2, 6}, []float64{2}, []float64{2, 6}, []float64{1, 2}},
		{"nothing censored", []float64{3, 1}, nil, []float64{1, 3}, nil},
		{"bad values are dropped", []float64{1, math.NaN(), -2}, []float64{math.Inf(1), 3}, []float64{1, 3}, []float64{1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := LearnGPUTimeDist(tc.done, tc.running)
			if !slices.Equal(d.sorted, tc.samples) || len(d.weights) != len(tc.w) {
				t.Fatalf("samples %v weights %v, want %v %v", d.sorted, d.weights, tc.samples, tc.w)
			}
			for i := range tc.w {
				if math.Abs(d.weights[i]-tc.w[i]) > 1e-12 {
					t.Fatalf("weights %v, want %v", d.weights, tc.w)
				}
			}
		})
	}
	// A learnt distribution gives a job the chance its peers give it: with
	// half the jobs still running past 100, a job at 100 is far less
	// likely to end soon than completions alone say.
	var done, running []float64
	for i := range 50 {
		done = append(done, float64(1+i))
		running = append(running, 100+float64(i))
	}
	biased, learnt := NewGPUTimeDist(done), LearnGPUTimeDist(done, running)
	if learnt.FullIndex(10) >= biased.FullIndex(10) {
		t.Errorf("index at 10: learnt %v, completions only %v: the running jobs must lower it", learnt.FullIndex(10), biased.FullIndex(10))
	}
}
