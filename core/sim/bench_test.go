package sim

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// BenchmarkTiresiasL100k replays 100,000 synthetic jobs on 2,048 GPUs
// (256 nodes of 8) under tiresias-l with GPU counting: at a nominal load
// of 0.9, where jobs seldom wait, and at 1.1, where queues build up and
// tiresias-l preempts tens of thousands of times. Run it by hand:
//
//	go test -run '^$' -bench TiresiasL100k -benchtime 1x -cpu 1 ./core/sim
func BenchmarkTiresiasL100k(b *testing.B) {
	nodes, err := trace.ParseClusterSpec("256x8")
	if err != nil {
		b.Fatal(err)
	}
	for _, load := range []float64{0.9, 1.1} {
		jobs := synthetic(100_000, 2048, load, 1)
		b.Run(fmt.Sprintf("load%.1f", load), func(b *testing.B) { benchRun(b, jobs, nodes, "tiresias-l") })
	}
}

// BenchmarkOpenB replays the 6,183-job openb trace on 3 nodes of 8 GPUs
// under each policy the fidelity check covers.
func BenchmarkOpenB(b *testing.B) {
	tr, err := trace.ReadFile(sharedTrace(b, "openb-last6w-tiresias.csv"), trace.FormatTiresias)
	if err != nil {
		b.Fatal(err)
	}
	nodes, err := trace.ParseClusterSpec("3x8")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range sched.Policies() {
		b.Run(p, func(b *testing.B) { benchRun(b, tr.Jobs, nodes, p) })
	}
}

func benchRun(b *testing.B, jobs []trace.Job, nodes []trace.Node, policy string) {
	cfg := Config{
		Sched: sched.Config{Policy: policy, Placement: sched.PlaceCount, OmitWaits: true},
		Nodes: nodes,
	}
	b.ReportAllocs()
	var r *Result
	for b.Loop() {
		var err error
		if r, err = Run(context.Background(), jobs, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.Passes), "passes")
	b.ReportMetric(float64(r.Preemptions), "preemptions")
	b.ReportMetric(r.AvgJCT, "avgJCT_s")
}
