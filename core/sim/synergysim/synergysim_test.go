package synergysim

import (
	"math"
	"testing"

	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/trace"
)

func readNative(t testing.TB) []SimJob {
	t.Helper()
	tr, err := trace.ReadFile("testdata/mixed40.csv", trace.FormatNative)
	if err != nil {
		t.Fatal(err)
	}
	return JobsFromTrace(tr, nil)
}

func TestSimulateNative(t *testing.T) {
	jobs := readNative(t)
	for _, nodes := range []int{1, 2} {
		cfg := SimConfig{Nodes: nodes, Node: synergy.SynergyNode}
		cfg.Mode = ModeProportional
		prop, err := Simulate(cfg, jobs)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Mode = ModeSynergy
		syn, err := Simulate(cfg, jobs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d GPUs: proportional %+v", nodes*8, prop)
		t.Logf("%d GPUs: synergy      %+v", nodes*8, syn)
		// Under proportional allocation every job runs at the speed its
		// trace duration was measured at.
		if math.Abs(prop.AvgSpeedup-1) > 1e-9 {
			t.Errorf("proportional speedup %v, want 1", prop.AvgSpeedup)
		}
		// Synergy never slows a job, and the mix has sensitive jobs.
		if syn.AvgSpeedup <= 1 {
			t.Errorf("synergy speedup %v, want > 1", syn.AvgSpeedup)
		}
		if syn.AvgJCT >= prop.AvgJCT {
			t.Errorf("synergy avg JCT %v not below proportional %v", syn.AvgJCT, prop.AvgJCT)
		}
		// Synergy hands out only CPUs that buy speed.
		if syn.CPUUseful < prop.CPUUseful {
			t.Errorf("synergy useful CPU %v below proportional %v", syn.CPUUseful, prop.CPUUseful)
		}
	}
}

func TestSimulateFlatIsProportional(t *testing.T) {
	// With no sensitive job both modes give the same JCTs.
	jobs := readNative(t)
	for i := range jobs {
		jobs[i].Profile = catalogued(synergy.FamilyInsensitive)
	}
	var jct [2]float64
	for i, m := range []Mode{ModeProportional, ModeSynergy} {
		r, err := Simulate(SimConfig{Nodes: 1, Node: synergy.SynergyNode, Mode: m}, jobs)
		if err != nil {
			t.Fatal(err)
		}
		jct[i] = r.AvgJCT
	}
	if math.Abs(jct[0]-jct[1]) > 1e-6 {
		t.Errorf("flat profiles: proportional %v, synergy %v", jct[0], jct[1])
	}
}

func TestSimulateErrors(t *testing.T) {
	jobs := []SimJob{{ID: 1, GPUs: 16, Duration: 1}}
	tests := []struct {
		name string
		cfg  SimConfig
		jobs []SimJob
	}{
		{"no nodes", SimConfig{Node: synergy.SynergyNode, Mode: ModeSynergy}, jobs},
		{"bad mode", SimConfig{Nodes: 4, Node: synergy.SynergyNode, Mode: "fair"}, jobs},
		{"job larger than the cluster", SimConfig{Nodes: 1, Node: synergy.SynergyNode, Mode: ModeSynergy}, jobs},
		{"no jobs", SimConfig{Nodes: 1, Node: synergy.SynergyNode, Mode: ModeSynergy}, nil},
	}
	for _, tc := range tests {
		if _, err := Simulate(tc.cfg, tc.jobs); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func BenchmarkSimulateNative(b *testing.B) {
	jobs := readNative(b)
	for b.Loop() {
		if _, err := Simulate(SimConfig{Nodes: 2, Node: synergy.SynergyNode, Mode: ModeSynergy}, jobs); err != nil {
			b.Fatal(err)
		}
	}
}
