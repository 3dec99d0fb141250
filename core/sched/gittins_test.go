package sched

import (
	"math"
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
