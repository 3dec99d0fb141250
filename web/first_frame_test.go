package web

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/telemetry"
)

// windowed is a test server with machines of perMachine GPUs each, their
// last 10 minutes recorded a reading a second: every other GPU holds a
// job with memory on it, the used memory moving each second.
func windowed(tb testing.TB, machines, perMachine int) *testServer {
	tb.Helper()
	tel := telemetry.New(historyWindow, 4000)
	ts := newTestServer(tb, func(c *testConfig) { c.Telemetry = tel })
	for i := range machines {
		name := fmt.Sprintf("m%03d", i)
		a, err := agent.New(agent.Config{Name: name, Backend: gpu.NewSim(name, perMachine, 80<<10), WorkDir: tb.TempDir()}, nil)
		if err != nil {
			tb.Fatal(err)
		}
		if err := ts.engine.AddNode(context.Background(), a); err != nil {
			tb.Fatal(err)
		}
	}
	now := ts.cfg.Now().Unix()
	for sec := now - int64(historyWindow/time.Second) + 1; sec <= now; sec++ {
		for i := range machines {
			name := fmt.Sprintf("m%03d", i)
			s := make([]gpu.Sample, perMachine)
			held := make(map[telemetry.GPUKey][]int64)
			for g := range s {
				s[g] = gpu.Sample{At: time.Unix(sec, 0), Index: g, MemMiB: 80 << 10, UtilPct: 50}
				if g%2 == 0 {
					id := int64(1000 + i*perMachine + g)
					used := 20<<10 + (sec%60)*100 + int64(g)
					s[g].MemUsedMiB, s[g].Jobs = used, []gpu.JobMem{{JobID: id, MemMiB: used}}
					held[telemetry.GPUKey{Node: name, Index: g}] = []int64{id}
				}
			}
			tel.RecordHeld(name, s, held)
		}
	}
	return ts
}

// BenchmarkFirstFrame builds and encodes what a new viewer of the gpus
// topic is sent first (the cluster page's GPU wall and utilization chart)
// with every GPU's 10 minutes recorded, and reports its size.
//
//	go test -run '^$' -bench FirstFrame -benchtime 5x ./web
func BenchmarkFirstFrame(b *testing.B) {
	for _, c := range []struct{ machines, perMachine int }{{1, 8}, {128, 8}} {
		b.Run(fmt.Sprintf("gpus=%d", c.machines*c.perMachine), func(b *testing.B) {
			ts := windowed(b, c.machines, c.perMachine)
			ctx := context.Background()
			var size int
			b.ResetTimer()
			for range b.N {
				data, err := ts.snapshot(ctx, app.AllSeeing(), topicGPUs)
				if err != nil {
					b.Fatal(err)
				}
				raw, err := encode(wsOut{Topic: topicGPUs, Type: "snapshot", Data: data})
				if err != nil {
					b.Fatal(err)
				}
				size = len(raw)
			}
			b.ReportMetric(float64(size), "bytes/frame")
		})
	}
}
