package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/jct"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/live"
)

// BenchmarkHub measures how fast the live stream delivers a frame of a
// 64-GPU cluster to N clients subscribed to gpus: one iteration publishes
// one frame and waits until every client has read it. It reports the p50
// and p99 delivery latency, the CPU used per wall second and per frame
// (server and clients: they share the process).
//
//	go test -run '^$' -bench Hub -benchtime 50x ./web
func BenchmarkHub(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) { benchHub(b, n) })
	}
}

func benchHub(b *testing.B, clients int) {
	// The recorder as serve makes it: 10 minutes, up to 2000 jobs (the
	// test server's keeps 10 jobs, fewer than the frame's 64).
	tel := telemetry.New(10*time.Minute, 2000)
	pub := live.New(live.Config{Telemetry: tel, Interval: time.Millisecond}) // the hub, not the rate cap
	ts := newTestServer(b, func(c *testConfig) { c.Telemetry, c.Live = tel, pub })
	srv := httptest.NewServer(ts.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pub.Run(ctx)
	go ts.Run(ctx)

	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws?topics=gpus"
	hdr := http.Header{"Authorization": {"Bearer " + ts.tokens["alice"]}}
	var (
		sent      atomic.Int64 // when the frame was recorded, Unix nanoseconds
		latencies = make([][]float64, clients)
		got       = make(chan struct{}, clients)
	)
	conns := make([]*websocket.Conn, 0, clients)
	for i := range clients {
		c, _, err := websocket.DefaultDialer.Dial(url, hdr)
		if err != nil {
			b.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
		var m wsOut
		if err := c.ReadJSON(&m); err != nil || m.Type != "snapshot" {
			b.Fatalf("snapshot: %v %+v", err, m)
		}
		// Each reader keeps its own latencies and reads into no new
		// buffer: the harness should cost little next to the hub.
		// Only the frames' updates count, not other messages of the topic.
		go func() {
			head := make([]byte, 48)
			for {
				_, r, err := c.NextReader()
				if err != nil {
					return
				}
				n, _ := io.ReadFull(r, head)
				if _, err := io.Copy(io.Discard, r); err != nil {
					return
				}
				if !bytes.Contains(head[:n], []byte(`"type":"update"`)) {
					continue
				}
				latencies[i] = append(latencies[i], float64(time.Now().UnixNano()-sent.Load())/1e9)
				got <- struct{}{}
			}
		}()
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	frame := make([]gpu.Sample, 64)
	for i := range frame {
		frame[i] = gpu.Sample{Index: i, MemMiB: 80 << 10, MemUsedMiB: int64(i) << 10, UtilPct: 90,
			Jobs: []gpu.JobMem{{JobID: int64(i), MemMiB: int64(i) << 10}}}
	}
	// One frame to warm up (goroutine stacks, first writes), not counted.
	for k := range frame {
		frame[k].At = time.Unix(999_999, 0)
	}
	sent.Store(time.Now().UnixNano())
	ts.cfg.Telemetry.Record("node-0", frame)
	for range clients {
		<-got
	}
	for i := range latencies {
		latencies[i] = latencies[i][:0]
	}
	cpu0, wall0 := cpuSeconds(), time.Now()
	b.ResetTimer()
	for i := range b.N {
		now := time.Unix(int64(1_000_000+i), 0)
		for k := range frame {
			frame[k].At = now
		}
		sent.Store(time.Now().UnixNano())
		ts.cfg.Telemetry.Record("node-0", frame)
		for range clients {
			<-got
		}
	}
	b.StopTimer()
	cpu := cpuSeconds() - cpu0
	cpuPerWall := cpu / time.Since(wall0).Seconds()
	var all []float64
	for _, l := range latencies {
		all = append(all, l...)
	}
	slices.Sort(all)
	b.ReportMetric(jct.Percentile(all, 50)*1000, "p50-ms")
	b.ReportMetric(jct.Percentile(all, 99)*1000, "p99-ms")
	b.ReportMetric(cpuPerWall, "cpu-cores")
	b.ReportMetric(cpu/float64(b.N)*1000, "cpu-ms/frame")
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
