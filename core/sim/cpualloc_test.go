package sim

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

func readMixed40(t *testing.T) []trace.Job {
	t.Helper()
	f, err := os.Open("synergysim/testdata/mixed40.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.ReadNative(f, "mixed40.csv")
	if err != nil {
		t.Fatal(err)
	}
	return tr.Jobs
}

func runCPU(t *testing.T, jobs []trace.Job, policy, mode, cluster string) *Result {
	t.Helper()
	nodes, err := trace.ParseClusterSpec(cluster)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), jobs, Config{Sched: sched.Config{Policy: policy, OmitWaits: true, CPUAlloc: mode}, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if r.Finished != r.Jobs {
		t.Fatalf("%s %s: finished %d of %d", policy, mode, r.Finished, r.Jobs)
	}
	return r
}

// TestCPUAllocModes: proportional allocation changes no job's speed (the
// run is the run without CPU modelling, plus the figures); synergy makes
// the mixed trace faster and uses at least as large a share of the cores
// usefully, and never slows a job on average.
func TestCPUAllocModes(t *testing.T) {
	jobs := readMixed40(t)
	for _, policy := range []string{"fjf", "tiresias-l"} {
		for _, cluster := range []string{"1x8", "2x8"} {
			off := runCPU(t, jobs, policy, "", cluster)
			prop := runCPU(t, jobs, policy, sched.AllocProportional, cluster)
			syn := runCPU(t, jobs, policy, sched.AllocSynergy, cluster)
			if off.CPU != nil {
				t.Fatalf("%s %s: CPU figures without --cpu-alloc", policy, cluster)
			}
			if prop.AvgJCT != off.AvgJCT || prop.Makespan != off.Makespan {
				t.Errorf("%s %s: proportional JCT %v makespan %v, without CPU modelling %v %v", policy, cluster, prop.AvgJCT, prop.Makespan, off.AvgJCT, off.Makespan)
			}
			if prop.CPU == nil || syn.CPU == nil {
				t.Fatalf("%s %s: no CPU figures", policy, cluster)
			}
			if prop.CPU.AvgSpeedup != 1 {
				t.Errorf("%s %s: proportional speedup %v, want 1", policy, cluster, prop.CPU.AvgSpeedup)
			}
			if !(syn.AvgJCT < prop.AvgJCT) || syn.CPU.AvgSpeedup <= 1 {
				t.Errorf("%s %s: synergy JCT %v (speedup %v), proportional %v: want faster", policy, cluster, syn.AvgJCT, syn.CPU.AvgSpeedup, prop.AvgJCT)
			}
			if syn.CPU.CPUUseful < prop.CPU.CPUUseful-1e-9 {
				t.Errorf("%s %s: synergy useful CPU %v below proportional %v", policy, cluster, syn.CPU.CPUUseful, prop.CPU.CPUUseful)
			}
			for _, c := range []*CPUResult{prop.CPU, syn.CPU} {
				if !(c.CPUAllocated > 0 && c.CPUAllocated <= 1 && c.CPUUseful <= c.CPUAllocated+1e-9 && c.MemAllocated <= 1) {
					t.Errorf("%s %s %s: fractions out of range: %+v", policy, cluster, c.Mode, c)
				}
			}
			t.Logf("%s %s: proportional JCT %.0f CPU %.3f/%.3f; synergy JCT %.0f CPU %.3f/%.3f speedup %.3f",
				policy, cluster, prop.AvgJCT, prop.CPU.CPUAllocated, prop.CPU.CPUUseful,
				syn.AvgJCT, syn.CPU.CPUAllocated, syn.CPU.CPUUseful, syn.CPU.AvgSpeedup)
		}
	}
}

// TestCPUAllocFlatProfiles: jobs that name no model and ask for nothing
// keep their proportional share, so the modes agree.
func TestCPUAllocFlatProfiles(t *testing.T) {
	var jobs []trace.Job
	for i := range 30 {
		jobs = append(jobs, trace.Job{ID: int64(i + 1), Submit: float64(i * 100), Duration: float64(500 + 97*i%2000), GPUs: 1 + i%4})
	}
	prop := runCPU(t, jobs, "tiresias-l", sched.AllocProportional, "2x4")
	syn := runCPU(t, jobs, "tiresias-l", sched.AllocSynergy, "2x4")
	if prop.AvgJCT != syn.AvgJCT || math.Abs(syn.CPU.AvgSpeedup-1) > 1e-12 {
		t.Fatalf("flat profiles: proportional JCT %v, synergy %v (speedup %v)", prop.AvgJCT, syn.AvgJCT, syn.CPU.AvgSpeedup)
	}
}

// TestCPUAllocDeclaredCurves: a native trace's declared curve decides a
// job's speed: two CPU-hungry jobs next to an idle-CPU one run faster
// under synergy.
func TestCPUAllocDeclaredCurves(t *testing.T) {
	jobs := []trace.Job{
		{ID: 1, Submit: 0, Duration: 1000, GPUs: 2, CPUCurve: "0:0;3:0.5;6:1"},
		{ID: 2, Submit: 0, Duration: 1000, GPUs: 2, CPUCurve: "0:0;0.5:1"},
	}
	prop := runCPU(t, jobs, "fjf", sched.AllocProportional, "1x4")
	syn := runCPU(t, jobs, "fjf", sched.AllocSynergy, "1x4")
	// Node: 4 GPUs, 12 cores. Job 2 needs 1 core; job 1 gets 11 of the
	// 12 cores (5.5 per GPU): speed 0.5 + 0.5*2.5/3 = 0.9167 against 0.5.
	if prop.AvgJCT != 1000 {
		t.Fatalf("proportional JCT %v, want 1000", prop.AvgJCT)
	}
	want := (1000/(0.9166666666666666/0.5) + 1000) / 2
	if math.Abs(syn.AvgJCT-want) > 1 {
		t.Fatalf("synergy JCT %v, want %v", syn.AvgJCT, want)
	}
	if _, err := Run(context.Background(), jobs, Config{Sched: sched.Config{Policy: "fjf", CPUAlloc: "synergy", Placement: sched.PlaceCount}, Nodes: []trace.Node{{Name: "n", GPUs: 4}}}); err == nil {
		t.Fatal("CPU allocation with count placement accepted")
	}
}
