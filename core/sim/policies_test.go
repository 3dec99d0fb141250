package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TestSixtyJobs runs every policy over the Tiresias sample trace. No job
// of it reaches 3,250 GPU-seconds, so every job stays in queue 0, where
// jobs run in arrival order and a job that does not fit is skipped:
// dlas, tiresias-l and fjf must give every job the same JCT.
func TestSixtyJobs(t *testing.T) {
	tr, err := trace.ReadFile(sharedTrace(t, "tiresias-60job.csv"), trace.FormatTiresias)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range tr.Jobs {
		if float64(j.GPUs)*j.Duration >= sched.DefaultThresholds[0] {
			t.Fatalf("job %d reaches %v GPU-seconds; the test's premise fails", j.ID, float64(j.GPUs)*j.Duration)
		}
	}
	for _, cluster := range []string{"1x8", "2x8"} {
		for _, placement := range []string{sched.PlaceCount, sched.PlaceNodes} {
			t.Run(cluster+"/"+placement, func(t *testing.T) {
				jcts := map[string]map[int64]float64{}
				for _, p := range sched.Policies() {
					cfg := Config{Sched: sched.Config{Policy: p, Placement: placement}}
					r, jct := run(t, tr.Jobs, cluster, cfg)
					if r.Finished != len(tr.Jobs) {
						t.Errorf("%s finished %d of %d jobs", p, r.Finished, len(tr.Jobs))
					}
					jcts[p] = jct
				}
				for _, p := range []string{"dlas", "tiresias-l"} {
					if jcts[p] == nil || jcts["fjf"] == nil {
						t.Logf("%s or fjf is not in the scheduling core yet", p)
						continue
					}
					for id, want := range jcts["fjf"] {
						if got := jcts[p][id]; got != want {
							t.Errorf("job %d: %s JCT %v, fjf %v", id, p, got, want)
						}
					}
				}
			})
		}
	}
}

// TestInvariants runs random traces under every policy, placement and a
// preemption cost, and checks what must hold whatever the policy: every
// job finishes, no sooner than its duration allows, and the GPU-seconds
// held add up to the work done plus one restore per preemption.
func TestInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for trial := range 4 {
		jobs := make([]trace.Job, 40)
		now := 0.0
		for i := range jobs {
			now += math.Floor(r.ExpFloat64() * 60)
			jobs[i] = gj(int64(i), now, []int{1, 1, 2, 4, 8}[r.IntN(5)], math.Ceil(r.ExpFloat64()*1800))
		}
		for _, p := range sched.Policies() {
			for _, placement := range []string{sched.PlaceCount, sched.PlaceNodes} {
				for _, cost := range []float64{0, 7} {
					name := fmt.Sprintf("trial%d/%s/%s/cost%v", trial, p, placement, cost)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						checkInvariants(t, jobs, Config{
							Sched:        sched.Config{Policy: p, Placement: placement, Thresholds: []float64{600, 3000}, PromoteKnob: float64(trial % 3)},
							PreemptCostS: cost,
						})
					})
				}
			}
		}
	}
}

func checkInvariants(t *testing.T, jobs []trace.Job, cfg Config) {
	t.Helper()
	nodes, _ := trace.ParseClusterSpec("2x4")
	cfg.Nodes = nodes
	s, err := newSimulator(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := s.result()
	if res.Finished != len(jobs) {
		t.Fatalf("finished %d of %d jobs", res.Finished, len(jobs))
	}
	want := 0.0
	for i := range s.jobs {
		j := &s.jobs[i]
		if j.finish-j.tj.Submit < j.tj.Duration+cfg.PreemptCostS*float64(j.preempts)-1e-6 {
			t.Errorf("job %d: JCT %v < duration %v + %d restores", j.tj.ID, j.finish-j.tj.Submit, j.tj.Duration, j.preempts)
		}
		want += float64(j.tj.GPUs) * (j.tj.Duration + cfg.PreemptCostS*float64(j.preempts))
	}
	if math.Abs(s.busy-want) > 1e-6*want {
		t.Errorf("GPU-seconds held %v, want %v", s.busy, want)
	}
	if res.GPUUtilization <= 0 || res.GPUUtilization > 1 {
		t.Errorf("GPU utilization %v", res.GPUUtilization)
	}
	if len(s.active) != s.finished || len(s.running) != 0 || s.gpus.free != s.gpus.total {
		t.Errorf("left over: %d active, %d running, %d of %d GPUs free", len(s.active)-s.finished, len(s.running), s.gpus.free, s.gpus.total)
	}
}
