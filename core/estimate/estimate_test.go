package estimate

import (
	"math"
	"testing"
)

func TestResidual(t *testing.T) {
	d := NewDurations([]float64{10, 20, 30, 100, 0, -5})
	tests := []struct {
		name string
		a    float64
		want float64
	}{
		{"a new job expects the mean", 0, 40},
		{"past the shortest, the rest", 10, (20+30+100)/3.0 - 10},
		{"long runners expect more", 50, 50},
		{"beyond every sample: half its age again", 200, 100},
	}
	for _, tc := range tests {
		if got := d.Residual(tc.a); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Residual(%v) = %v, want %v", tc.name, tc.a, got, tc.want)
		}
	}
	if d.Len() != 4 || d.Mean() != 40 {
		t.Errorf("len %d mean %v", d.Len(), d.Mean())
	}
}

func TestStarts(t *testing.T) {
	d := NewDurations([]float64{100}) // every job runs 100s
	got := Starts(1000, 4,
		[]Running{{GPUs: 2, ExecutedS: 40}, {GPUs: 2, ExecutedS: 90}},
		[]Waiting{{ID: 1, GPUs: 2}, {ID: 2, GPUs: 4}, {ID: 3, GPUs: 1}, {ID: 4, GPUs: 8}},
		d)
	want := map[int64]float64{
		1: 1010, // the job that has run 90s frees 2 GPUs 10s from now
		2: 1110, // needs all 4: waits for job 1 (started at 1010, runs 100s)
		3: 1210, // strict order: after job 2
	}
	if len(got) != len(want) {
		t.Fatalf("estimates = %v, want %v (job 4 can never fit)", got, want)
	}
	for id, w := range want {
		if math.Abs(got[id]-w) > 1e-9 {
			t.Errorf("job %d starts at %v, want %v", id, got[id], w)
		}
	}
}

func TestStartsWithFreeGPUs(t *testing.T) {
	got := Starts(5, 8, nil, []Waiting{{ID: 1, GPUs: 8}}, NewDurations(nil))
	if got[1] != 5 {
		t.Errorf("a job that fits now starts now: %v", got)
	}
}
