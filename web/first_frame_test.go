package web

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
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
	now := time.Now().Truncate(time.Second) // still, so that the readings read are those recorded
	ts := newTestServer(tb, func(c *testConfig) { c.Telemetry, c.Now = tel, func() time.Time { return now } })
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
	for sec := now.Unix() - int64(historyWindow/time.Second) + 1; sec <= now.Unix(); sec++ {
		for i := range machines {
			name := fmt.Sprintf("m%03d", i)
			s := make([]gpu.Sample, perMachine)
			held := make(map[gpu.Ref][]int64)
			for g := range s {
				s[g] = gpu.Sample{At: time.Unix(sec, 0), Index: g, MemMiB: 80 << 10, UtilPct: 50}
				if g%2 == 0 {
					id := int64(1000 + i*perMachine + g)
					used := 20<<10 + (sec%60)*100 + int64(g)
					s[g].MemUsedMiB, s[g].Jobs = used, []gpu.JobMem{{JobID: id, MemMiB: used}}
					held[gpu.Ref{Node: name, Index: g}] = []int64{id}
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
			// An update of the same GPUs, every one having read, and the
			// same readings as GPUSeries (what an update was before).
			f := newestFrame(ts)
			raw, err := encode(wsOut{Topic: topicGPUs, Type: "update", Data: ts.frameUpdate(f)})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(raw)), "bytes/update")
			var series []api.GPUSeries
			for _, g := range f.GPUs {
				series = append(series, api.GPUSeries{UUID: fmt.Sprintf("GPU-%s-%d-0000-0000-000000000000", g.Node, g.Index), Node: g.Node,
					Index: g.Index, Model: "NVIDIA H100 80GB HBM3", Points: []api.Point{pointOf(g.Point)}})
			}
			if raw, err = encode(wsOut{Topic: topicGPUs, Type: "update", Data: series}); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(raw)), "bytes/series-update")
		})
	}
}

// The first frame of the gpus topic is bounded (a step per few seconds,
// more for more GPUs), keeps each step's peak, ends with each GPU's newest
// reading as the updates send it, and has the cluster's figures each
// second as GET /cluster/history?range=10m computes them.
func TestFirstFrame(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		gpus int
		step int64
	}{{1, 2}, {8, 2}, {160, 2}, {200, 2}, {1024, 7}, {4096, 26}} {
		if got := wallStep(c.gpus); got != c.step {
			t.Errorf("wallStep(%d) = %d; want %d", c.gpus, got, c.step)
		}
	}

	ts := windowed(t, 2, 4)
	w := ts.gpuWall()
	if w.Step != 2 || len(w.GPUs) != 8 {
		t.Fatalf("first frame: step %d s, %d GPUs; want 2 s, 8", w.Step, len(w.GPUs))
	}
	since := ts.cfg.Now().Add(-historyWindow).Unix()
	for _, g := range w.GPUs {
		pts := ts.cfg.Telemetry.GPU(gpu.Ref{Node: g.Node, Index: g.Index}, since)
		if len(g.UsedMaxMiB) > wallPoints+1 || len(g.UsedMaxMiB) < len(pts)/int(w.Step) {
			t.Errorf("%s/%d: %d steps for %d readings", g.Node, g.Index, len(g.UsedMaxMiB), len(pts))
		}
		// Each step holds the most memory used among its readings; a
		// step with none is null.
		most := map[int64]int64{}
		for _, p := range pts {
			i := (p.T - w.From) / w.Step
			most[i] = max(most[i], p.MemUsedMiB)
		}
		for i, v := range g.UsedMaxMiB {
			want, ok := most[int64(i)]
			if (v == nil) == ok || (v != nil && *v != want) {
				t.Errorf("%s/%d step %d: %v; want the most of its readings, %d (%v)", g.Node, g.Index, i, v, want, ok)
				break
			}
		}
		if want := pointOf(pts[len(pts)-1]); g.Last == nil || g.Last.T != want.T || g.Last.MemUsedMiB != want.MemUsedMiB || len(g.Last.Held) != len(want.Held) {
			t.Errorf("%s/%d: last %+v; want the newest reading %+v", g.Node, g.Index, g.Last, want)
		}
	}
	// An update carries each GPU's reading in a few numbers, by machine.
	f := newestFrame(ts)
	raw, err := json.Marshal(ts.frameUpdate(f))
	if err != nil {
		t.Fatal(err)
	}
	var u api.GPUsUpdate
	if err := json.Unmarshal(raw, &u); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range u.Nodes {
		for _, r := range n.GPUs {
			got = append(got, fmt.Sprintf("%s/%d t=%d used=%d mem=%d held=%v", n.Node, r[0], n.T, r[1], r[2], r[3:]))
		}
	}
	var want []string
	for _, g := range f.GPUs {
		want = append(want, fmt.Sprintf("%s/%d t=%d used=%d mem=%d held=%v", g.Node, g.Index, g.T, g.MemUsedMiB, g.MemMiB, append([]int64{}, g.Held...)))
	}
	if !slices.Equal(got, want) || len(u.Nodes) != 2 {
		t.Errorf("update of %d machines:\n%s\nwant the readings of 2:\n%s", len(u.Nodes), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	h, err := ts.clusterHistory(context.Background(), historyRanges[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Cluster) != 600 || !slices.Equal(w.Cluster, h.Points) {
		t.Errorf("first frame: %d cluster seconds, the API %d; want the same 600", len(w.Cluster), len(h.Points))
	}
	if p := w.Cluster[len(w.Cluster)-1]; p.GPUs != 8 || p.BusyGPUs != 4 {
		t.Errorf("cluster now: %+v; want 8 GPUs, 4 busy", p)
	}
}

// newestFrame is a frame of every connected GPU's newest reading, as the
// live stream would publish when every machine has just read.
func newestFrame(ts *testServer) telemetry.Frame {
	f := telemetry.Frame{T: ts.cfg.Now().Unix()}
	for _, g := range ts.app.ConnectedGPUs() {
		pts := ts.cfg.Telemetry.GPU(g.Key, f.T-int64(historyWindow/time.Second))
		if len(pts) > 0 {
			f.GPUs = append(f.GPUs, telemetry.GPUFrame{Ref: g.Key, Point: pts[len(pts)-1]})
		}
	}
	return f
}
