package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/jct"
)

// BenchmarkHub measures how fast the live stream delivers a frame of a
// 64-GPU cluster to N clients subscribed to gpus: one iteration publishes
// one frame and waits until every client has read it. It reports the p50
// and p99 delivery latency and the CPU used per wall second.
//
//	go test -run '^$' -bench Hub -benchtime 50x ./web
func BenchmarkHub(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) { benchHub(b, n) })
	}
}

func benchHub(b *testing.B, clients int) {
	ts := newTestServer(b)
	srv := httptest.NewServer(ts.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ts.Run(ctx)

	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws?topics=gpus"
	hdr := http.Header{"Authorization": {"Bearer " + ts.tokens["alice"]}}
	var (
		mu        sync.Mutex
		sent      time.Time
		latencies []float64
		got       = make(chan struct{}, clients)
	)
	conns := make([]*websocket.Conn, 0, clients)
	for range clients {
		c, _, err := websocket.DefaultDialer.Dial(url, hdr)
		if err != nil {
			b.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
		var m wsOut
		if err := c.ReadJSON(&m); err != nil || m.Type != "snapshot" {
			b.Fatalf("snapshot: %v %+v", err, m)
		}
		go func() {
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
				mu.Lock()
				latencies = append(latencies, time.Since(sent).Seconds())
				mu.Unlock()
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
	cpu0, wall0 := cpuSeconds(), time.Now()
	b.ResetTimer()
	for i := range b.N {
		now := time.Unix(int64(1_000_000+i), 0)
		for k := range frame {
			frame[k].At = now
		}
		mu.Lock()
		sent = time.Now()
		mu.Unlock()
		ts.cfg.Telemetry.Record("node-0", frame)
		for range clients {
			<-got
		}
	}
	b.StopTimer()
	cpuPerWall := (cpuSeconds() - cpu0) / time.Since(wall0).Seconds()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(latencies)
	b.ReportMetric(jct.Percentile(latencies, 50)*1000, "p50-ms")
	b.ReportMetric(jct.Percentile(latencies, 99)*1000, "p99-ms")
	b.ReportMetric(cpuPerWall, "cpu-cores")
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
