package salussim

import (
	"math"
	"testing"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/trace"
)

// frac is a job asking for milli thousandths of one GPU.
func frac(id int64, submit, duration float64, milli int) trace.Job {
	return trace.Job{ID: id, Submit: submit, Duration: duration, GPUs: 1, GPUMilli: milli}
}

// whole is a job asking for gpus whole GPUs.
func whole(id int64, submit, duration float64, gpus int) trace.Job {
	return trace.Job{ID: id, Submit: submit, Duration: duration, GPUs: gpus, GPUMilli: 1000}
}

// TestGolden checks tiny scenarios whose JCTs were worked out by hand.
// Memory is unpadded unless said, so a job of milli m holds m/1000 of the
// GPU: P a fifth of it, E the rest.
func TestGolden(t *testing.T) {
	noPad := func(pol lanes.Policy) lanes.Config {
		return lanes.Config{Policy: pol, Padding: memest.NoPadding}
	}
	// Two jobs of 600 on one GPU: the second finds 0.4 free, less than
	// its 0.6, and joins the first's lane (P 0.12 + growth 0 <= 0.4), so
	// they take turns by iterations of 10 s. A runs 30 s, B 10 s.
	turns := []trace.Job{frac(1, 0, 30, 600), frac(2, 0, 10, 600)}
	cases := []struct {
		name    string
		jobs    []trace.Job
		cfg     Config
		wantJCT map[int64]float64
		shared  int
	}{
		{
			name: "none: fractional jobs queue for the one GPU",
			jobs: []trace.Job{frac(1, 0, 100, 500), frac(2, 0, 100, 400)},
			cfg:  Config{GPUs: 1, Sharing: SharingNone},
			// A 0-100, B 100-200.
			wantJCT: map[int64]float64{1: 100, 2: 200},
		},
		{
			name: "salus: two lanes that fit run side by side",
			jobs: []trace.Job{frac(1, 0, 100, 500), frac(2, 0, 100, 400)},
			cfg:  Config{GPUs: 1, Sharing: SharingSalus, Lanes: noPad(lanes.Pack)},
			// 0.5 + 0.4 <= 1: a lane each, both run 0-100.
			wantJCT: map[int64]float64{1: 100, 2: 100}, shared: 2,
		},
		{
			name: "salus: a share slowdown stretches co-located jobs",
			jobs: []trace.Job{frac(1, 0, 100, 500), frac(2, 0, 100, 400)},
			cfg:  Config{GPUs: 1, Sharing: SharingSalus, Lanes: noPad(lanes.Pack), ShareSlowdown: 0.2},
			// Both at 0.8 speed: 125 s.
			wantJCT: map[int64]float64{1: 125, 2: 125}, shared: 2,
		},
		{
			name: "salus pack: the lane runs in arrival order",
			jobs: turns,
			cfg:  Config{GPUs: 1, Sharing: SharingSalus, Lanes: noPad(lanes.Pack), IterationS: 10},
			// A A A (0-30), B (30-40).
			wantJCT: map[int64]float64{1: 30, 2: 40}, shared: 2,
		},
		{
			name: "salus fair: the least GPU time goes next",
			jobs: turns,
			cfg:  Config{GPUs: 1, Sharing: SharingSalus, Lanes: noPad(lanes.Fair), IterationS: 10},
			// A (0-10: tie, admitted first), B (10-20, 0 s < 10 s), A A (20-40).
			wantJCT: map[int64]float64{1: 40, 2: 20}, shared: 2,
		},
		{
			name: "salus srtf: the shortest remaining goes next",
			jobs: turns,
			cfg:  Config{GPUs: 1, Sharing: SharingSalus, Lanes: noPad(lanes.SRTF), IterationS: 10},
			// B (0-10, 10 s left < 30 s), A A A (10-40).
			wantJCT: map[int64]float64{1: 40, 2: 10}, shared: 2,
		},
		{
			name: "none: a whole-GPU job waits behind fractional ones",
			jobs: []trace.Job{frac(1, 0, 100, 500), frac(2, 0, 100, 400), whole(3, 1, 50, 1)},
			cfg:  Config{GPUs: 2, Sharing: SharingNone},
			// A on GPU 0, B on GPU 1 at 0; C waits until 100: 100-150.
			wantJCT: map[int64]float64{1: 100, 2: 100, 3: 149},
		},
		{
			name: "salus: packing fractional jobs leaves a GPU for a whole one",
			jobs: []trace.Job{frac(1, 0, 100, 500), frac(2, 0, 100, 400), whole(3, 1, 50, 1)},
			cfg:  Config{GPUs: 2, Sharing: SharingSalus, Lanes: noPad(lanes.Pack)},
			// B opens a lane on the fuller GPU 0; C takes GPU 1 at 1: 1-51.
			wantJCT: map[int64]float64{1: 100, 2: 100, 3: 50}, shared: 2,
		},
		{
			name: "salus: a job too large once padded runs alone",
			jobs: []trace.Job{frac(1, 0, 100, 990), frac(2, 0, 100, 10)},
			cfg:  Config{GPUs: 1, Sharing: SharingSalus},
			// 990: P' 0.218 + E 0.792 = 1.01, x 1.05 > 1. It holds the GPU
			// 0-100; the job of 10 waits (no lane can open on a held GPU).
			wantJCT: map[int64]float64{1: 100, 2: 200}, shared: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := newSimulator(c.jobs, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.loop(); err != nil {
				t.Fatal(err)
			}
			r := s.result()
			for _, j := range s.jobs {
				if got := j.finish - j.t.Submit; math.Abs(got-c.wantJCT[j.t.ID]) > 1e-6 {
					t.Errorf("job %d: JCT %v, want %v", j.t.ID, got, c.wantJCT[j.t.ID])
				}
			}
			if r.Finished != len(c.jobs) || r.Shared != c.shared {
				t.Errorf("finished %d of %d, shared %d (want %d)", r.Finished, len(c.jobs), r.Shared, c.shared)
			}
		})
	}
}

// TestContention: two lanes whose jobs need 0.6 of the GPU's compute
// each but hold little memory run at 1/1.2 speed: 100 s of work take
// 120 s. (Memory derived from gpu_milli never lets concurrent lanes ask
// for more than one GPU's compute; this sets memory by hand.)
func TestContention(t *testing.T) {
	jobs := []trace.Job{frac(1, 0, 100, 600), frac(2, 0, 100, 600)}
	s, err := newSimulator(jobs, Config{GPUs: 1, Sharing: SharingSalus})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range s.jobs {
		j.mem = memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000}
	}
	if err := s.loop(); err != nil {
		t.Fatal(err)
	}
	for _, j := range s.jobs {
		if math.Abs(j.finish-120) > 1e-6 {
			t.Errorf("job %d finished at %v, want 120", j.t.ID, j.finish)
		}
	}
}

// TestRunRefuses checks what Run refuses.
func TestRunRefuses(t *testing.T) {
	cases := []struct {
		name string
		jobs []trace.Job
		cfg  Config
	}{
		{"no GPUs", []trace.Job{frac(1, 0, 1, 500)}, Config{}},
		{"more GPUs than the cluster", []trace.Job{whole(1, 0, 1, 3)}, Config{GPUs: 2}},
		{"a negative duration", []trace.Job{frac(1, 0, -1, 500)}, Config{GPUs: 1}},
		{"a NaN submit time", []trace.Job{frac(1, math.NaN(), 1, 500)}, Config{GPUs: 1}},
		{"a duplicate job", []trace.Job{frac(1, 0, 1, 500), frac(1, 0, 1, 500)}, Config{GPUs: 1}},
		{"an unknown sharing mode", nil, Config{GPUs: 1, Sharing: "mps"}},
		{"a persistent share of 1", nil, Config{GPUs: 1, PersistentShare: 1}},
		{"a slowdown of 1", nil, Config{GPUs: 1, ShareSlowdown: 1}},
	}
	for _, c := range cases {
		if _, err := Run(c.jobs, c.cfg); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
