//go:build figures

package synergysim

import (
	"testing"

	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TestOpenBFigures prints the openb figures of docs/synergy.md and checks
// that Synergy's average JCT is no worse than proportional allocation's.
// It takes about 20 s, so it is built only with the tag figures:
//
//	go test -tags figures -count=1 -run TestOpenBFigures -v ./core/sim/synergysim
func TestOpenBFigures(t *testing.T) {
	tr, err := trace.ReadFile("../../../testdata/traces/openb-pods.csv", trace.FormatOpenB)
	if err != nil {
		t.Fatal(err)
	}
	jobs := JobsFromTrace(tr, nil)
	jobs = jobs[len(jobs)-6183:] // the last six weeks, as openb-last6w-tiresias.csv
	families := map[string]int{}
	for _, j := range jobs {
		families[j.Profile.Family]++
	}
	t.Logf("families: %v", families)
	for _, nodes := range []int{3, 4} {
		var res [2]SimResult
		for i, m := range []Mode{ModeProportional, ModeSynergy} {
			if res[i], err = Simulate(SimConfig{Nodes: nodes, Node: synergy.SynergyNode, Mode: m}, jobs); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d GPUs %-12s avg JCT %8.0f s  makespan %8.0f s  CPU allocated %.3f useful %.3f  memory %.3f  speedup %.3f",
				nodes*8, m, res[i].AvgJCT, res[i].Makespan, res[i].CPUAllocated, res[i].CPUUseful, res[i].MemAllocated, res[i].AvgSpeedup)
		}
		if res[1].AvgJCT > res[0].AvgJCT {
			t.Errorf("%d GPUs: synergy avg JCT %v above proportional %v", nodes*8, res[1].AvgJCT, res[0].AvgJCT)
		}
	}
}
