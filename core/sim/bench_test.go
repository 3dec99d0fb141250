package sim

import (
	"context"
	"flag"
	"fmt"
	"os"
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

// sim100kOut names a file into which BenchmarkSim100k also writes its
// trace, as a native CSV, so that `gpuportal sim` can replay the same
// jobs (docs/simulator.md, "Speed").
var sim100kOut = flag.String("sim100k-out", "", "BenchmarkSim100k: also write its trace to this native CSV `file`")

// BenchmarkSim100k replays 100,000 synthetic jobs on 2,048 GPUs (256
// nodes of 8) under tiresias-l at a nominal load of 0.9, with real nodes
// placement (the simulator's default) and with GPU counting, as
// `gpuportal sim` runs them (explanations omitted). Run it by hand:
//
//	go test -run '^$' -bench Sim100k -benchtime 1x -cpu 1 ./core/sim
func BenchmarkSim100k(b *testing.B) {
	nodes, err := trace.ParseClusterSpec("256x8")
	if err != nil {
		b.Fatal(err)
	}
	jobs := synthetic(100_000, 2048, 0.9, 1)
	if *sim100kOut != "" {
		f, err := os.Create(*sim100kOut)
		if err != nil {
			b.Fatal(err)
		}
		if err := trace.WriteNative(f, jobs); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for _, placement := range []string{sched.PlaceNodes, sched.PlaceCount} {
		b.Run(placement, func(b *testing.B) { benchRunPlaced(b, jobs, nodes, "tiresias-l", placement) })
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
	benchRunPlaced(b, jobs, nodes, policy, sched.PlaceCount)
}

func benchRunPlaced(b *testing.B, jobs []trace.Job, nodes []trace.Node, policy, placement string) {
	cfg := Config{
		Sched: sched.Config{Policy: policy, Placement: placement, OmitWaits: true},
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
