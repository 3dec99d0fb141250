package sim

import (
	"context"
	"math"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// fidelityBand is how far an average JCT may land from the reference
// under the reference's rules (sched.Config.Reference). What is left is
// the reference's own quirks: whole seconds, and a late demotion of
// multi-GPU jobs that the core does not copy (docs/simulator.md,
// "Fidelity"), 14 s of 12,421 for tiresias-l at 24 GPUs.
const fidelityBand = 0.002

// referenceAvgJCT are the Tiresias simulator's average JCTs, in seconds,
// on openb-last6w-tiresias.csv with GPU counting (shared/traces/README.md).
var referenceAvgJCT = []struct {
	policy  string
	cluster string
	avgJCT  float64
}{
	{"fifo", "3x8", 325866},
	{"fifo", "4x8", 103891},
	{"fjf", "3x8", 43820},
	{"fjf", "4x8", 32233},
	{"tiresias-l", "3x8", 12421},
	{"tiresias-l", "4x8", 10217},
	{"tiresias-g", "3x8", 10967},
	{"tiresias-g", "4x8", 9755},
	{"srsf", "3x8", 10450},
	{"srsf", "4x8", 9608},
}

// TestFidelity replays the openb trace under the settings of the
// reference figures (GPU counting, free preemption, the reference's
// rules: sched.Config.Reference) and checks each average JCT within
// fidelityBand of the reference.
func TestFidelity(t *testing.T) {
	tr, err := trace.ReadFile(sharedTrace(t, "openb-last6w-tiresias.csv"), trace.FormatTiresias)
	if err != nil {
		t.Fatal(err)
	}
	clusters := map[string][]trace.Node{}
	for _, c := range referenceAvgJCT {
		if clusters[c.cluster], err = trace.ParseClusterSpec(c.cluster); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range referenceAvgJCT {
		t.Run(c.policy+"/"+c.cluster, func(t *testing.T) {
			t.Parallel()
			if !hasPolicy(c.policy) {
				t.Fatalf("policy %s is not in the scheduling core", c.policy)
			}
			r, err := Run(context.Background(), tr.Jobs, Config{
				Sched: sched.Config{Policy: c.policy, Placement: sched.PlaceCount, OmitWaits: true, Reference: true},
				Nodes: clusters[c.cluster],
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Finished != r.Jobs {
				t.Fatalf("finished %d of %d jobs", r.Finished, r.Jobs)
			}
			off := r.AvgJCT/c.avgJCT - 1
			t.Logf("avg JCT %.0f s, reference %.0f s (%+.2f%%), wall %.3f s", r.AvgJCT, c.avgJCT, 100*off, r.WallS)
			if math.Abs(off) > fidelityBand {
				t.Errorf("avg JCT %.0f s is %+.2f%% from the reference %.0f s (band %.1f%%)", r.AvgJCT, 100*off, c.avgJCT, 100*fidelityBand)
			}
		})
	}
}

// TestBetterThanReference replays the openb trace under the core's own
// rules (preempted-first for tiresias-l, the full Gittins index for
// tiresias-g) and requires each average JCT at or below the reference
// simulator's.
func TestBetterThanReference(t *testing.T) {
	tr, err := trace.ReadFile(sharedTrace(t, "openb-last6w-tiresias.csv"), trace.FormatTiresias)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range referenceAvgJCT {
		if c.policy != "tiresias-l" && c.policy != "tiresias-g" {
			continue
		}
		t.Run(c.policy+"/"+c.cluster, func(t *testing.T) {
			t.Parallel()
			nodes, err := trace.ParseClusterSpec(c.cluster)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), tr.Jobs, Config{
				Sched: sched.Config{Policy: c.policy, Placement: sched.PlaceCount, OmitWaits: true},
				Nodes: nodes,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("avg JCT %.0f s, reference %.0f s (%+.1f%%)", r.AvgJCT, c.avgJCT, 100*(r.AvgJCT/c.avgJCT-1))
			if r.Finished != r.Jobs || r.AvgJCT > c.avgJCT {
				t.Errorf("avg JCT %.0f s (%d of %d jobs finished), want at most the reference's %.0f s", r.AvgJCT, r.Finished, r.Jobs, c.avgJCT)
			}
		})
	}
}
