package sim

import (
	"context"
	"math"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// gj builds a trace job: id, submit, GPUs, duration.
func gj(id int64, submit float64, gpus int, dur float64) trace.Job {
	return trace.Job{ID: id, Submit: submit, GPUs: gpus, Duration: dur, GPUMilli: 1000}
}

// run simulates jobs on nodes x gpus GPUs, failing the test on error.
func run(t *testing.T, jobs []trace.Job, cluster string, cfg Config) (*Result, map[int64]float64) {
	t.Helper()
	nodes, err := trace.ParseClusterSpec(cluster)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Nodes = nodes
	cfg.Sched.OmitWaits = true
	s, err := newSimulator(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	jct := map[int64]float64{}
	for i := range s.jobs {
		if j := &s.jobs[i]; j.done {
			jct[j.tj.ID] = j.finish - j.tj.Submit
		}
	}
	return s.result(), jct
}

// TestGolden checks JCTs worked out by hand from each policy's rules.
func TestGolden(t *testing.T) {
	// blocking: J1 holds 3 of 4 GPUs until 100. J2 (2 GPUs) cannot start;
	// J3 (1 GPU) can, unless fifo makes it wait behind J2.
	blocking := []trace.Job{gj(1, 0, 3, 100), gj(2, 10, 2, 50), gj(3, 20, 1, 30)}
	// demotion: A (2 GPUs, 100 s) reaches 100 GPU-seconds at t=50.
	demotion := []trace.Job{gj(1, 0, 2, 100), gj(2, 10, 1, 30)}
	// starvation: two 100 s jobs on one GPU, queue limit 10 GPU-seconds.
	starvation := []trace.Job{gj(1, 0, 1, 100), gj(2, 20, 1, 100)}

	cases := []struct {
		name        string
		jobs        []trace.Job
		cluster     string
		cfg         sched.Config
		preemptCost float64
		jct         map[int64]float64
		preemptions int
	}{
		{
			// J2 and J3 both start when J1 ends at 100.
			name: "fifo blocks the line", jobs: blocking, cluster: "1x4",
			cfg: sched.Config{Policy: "fifo"},
			jct: map[int64]float64{1: 100, 2: 150 - 10, 3: 130 - 20},
		},
		{
			// J3 skips ahead at 20 and ends at 50; J2 starts at 100.
			name: "fjf skips a job that does not fit", jobs: blocking, cluster: "1x4",
			cfg: sched.Config{Policy: "fjf"},
			jct: map[int64]float64{1: 100, 2: 140, 3: 30},
		},
		{
			// At 10, J2 (50 s left) outranks J1 (90 s left) and preempts
			// it; J3 takes a free GPU at 20. J1 resumes at 60, ends at 150.
			name: "srtf preempts the longest remaining", jobs: blocking, cluster: "1x4",
			cfg: sched.Config{Policy: "srtf"},
			jct: map[int64]float64{1: 150, 2: 50, 3: 30}, preemptions: 1,
		},
		{
			// Service left at 10: J2 2x50=100 < J1 3x90=270; as srtf.
			name: "srsf weighs remaining time by GPUs", jobs: blocking, cluster: "1x4",
			cfg: sched.Config{Policy: "srsf"},
			jct: map[int64]float64{1: 150, 2: 50, 3: 30}, preemptions: 1,
		},
		{
			// A is demoted at 50 (100 GPU-s); B, waiting in queue 0,
			// preempts it and runs 50-80; A resumes at 80 and ends at 130.
			name: "tiresias-l demotes by GPU-seconds", jobs: demotion, cluster: "1x2",
			cfg: sched.Config{Policy: "tiresias-l", Thresholds: []float64{100}},
			jct: map[int64]float64{1: 130, 2: 70}, preemptions: 1,
		},
		{
			// As above, but A first spends 5 s restoring: ends at 135.
			name: "preempt cost delays the resumed job", jobs: demotion, cluster: "1x2",
			cfg: sched.Config{Policy: "tiresias-l", Thresholds: []float64{100}}, preemptCost: 5,
			jct: map[int64]float64{1: 135, 2: 70}, preemptions: 1,
		},
		{
			// dlas counts seconds: A would reach 100 s only as it ends.
			name: "dlas demotes by executed seconds", jobs: demotion, cluster: "1x2",
			cfg: sched.Config{Policy: "dlas", Thresholds: []float64{100}},
			jct: map[int64]float64{1: 100, 2: 120},
		},
		{
			// B preempts A (queue 1 since 10) at 20 and, once demoted at
			// 30, keeps running (running jobs first) until 120.
			name: "tiresias-l without promotion", jobs: starvation, cluster: "1x1",
			cfg: sched.Config{Policy: "tiresias-l", Thresholds: []float64{10}},
			jct: map[int64]float64{1: 200, 2: 100}, preemptions: 1,
		},
		{
			// A waiting job is promoted once its wait reaches its run in
			// the cycle (20 s): the jobs trade the GPU every 20 s. A runs
			// 0-20, 40-60, ..., 160-180; B runs 20-40, ..., 180-200.
			name: "tiresias-l promotes starved jobs", jobs: starvation, cluster: "1x1",
			cfg: sched.Config{Policy: "tiresias-l", Thresholds: []float64{10}, PromoteKnob: 1},
			jct: map[int64]float64{1: 180, 2: 180}, preemptions: 8,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !hasPolicy(c.cfg.Policy) {
				t.Fatalf("policy %s is not in the scheduling core", c.cfg.Policy)
			}
			r, jct := run(t, c.jobs, c.cluster, Config{Sched: c.cfg, PreemptCostS: c.preemptCost})
			for id, want := range c.jct {
				if got, ok := jct[id]; !ok || math.Abs(got-want) > 1e-6 {
					t.Errorf("job %d: JCT %v, want %v", id, got, want)
				}
			}
			if r.Preemptions != c.preemptions {
				t.Errorf("preemptions %d, want %d", r.Preemptions, c.preemptions)
			}
			if r.Finished != len(c.jobs) {
				t.Errorf("finished %d of %d", r.Finished, len(c.jobs))
			}
		})
	}
}

// TestGoldenMetrics checks the figures derived from the JCTs of the fifo
// case of TestGolden: JCTs 100, 140, 110 of jobs lasting 100, 50, 30 on
// 4 GPUs, last one ending at 150.
func TestGoldenMetrics(t *testing.T) {
	jobs := []trace.Job{gj(1, 0, 3, 100), gj(2, 10, 2, 50), gj(3, 20, 1, 30)}
	r, _ := run(t, jobs, "1x4", Config{Sched: sched.Config{Policy: "fifo"}})
	want := Result{
		Policy: "fifo", Jobs: 3, Finished: 3,
		AvgJCT: 350.0 / 3, P50JCT: 110, P95JCT: 140, P99JCT: 140,
		AvgPending: (0 + 90 + 80) / 3.0,
		Makespan:   150,
		// 3x100 + 2x50 + 1x30 GPU-seconds over 4 GPUs x 150 s.
		GPUUtilization: 430.0 / 600,
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"avg JCT", r.AvgJCT, want.AvgJCT},
		{"p50", r.P50JCT, want.P50JCT},
		{"p95", r.P95JCT, want.P95JCT},
		{"p99", r.P99JCT, want.P99JCT},
		{"avg pending", r.AvgPending, want.AvgPending},
		{"makespan", r.Makespan, want.Makespan},
		{"GPU utilization", r.GPUUtilization, want.GPUUtilization},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.Policy != want.Policy || r.Jobs != want.Jobs || r.Finished != want.Finished {
		t.Errorf("got %s %d/%d", r.Policy, r.Finished, r.Jobs)
	}
}

func hasPolicy(name string) bool {
	for _, p := range sched.Policies() {
		if p == name {
			return true
		}
	}
	return false
}
