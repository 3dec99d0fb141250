package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/gpu"
)

// liveMachines is how many simulated machines the scale tests connect.
const liveMachines = 160

// manyMachines connects n simulated machines of gpus GPUs each to a test
// server publishing the live stream, and returns the stream's URL.
func manyMachines(t testing.TB, n, gpus int) (*testServer, string) {
	t.Helper()
	ts := newTestServer(t)
	for i := range n {
		name := fmt.Sprintf("m%03d", i)
		a, err := agent.New(agent.Config{Name: name, Backend: gpu.NewSim(name, gpus, 80<<10), WorkDir: t.TempDir()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.cfg.Engine.AddNode(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(ts.Handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ts.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ts, "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

// report records one second of every machine, one machine at a time, as
// the agents report.
func report(ts *testServer, n, gpus int, sec int64) {
	for i := range n {
		s := make([]gpu.Sample, gpus)
		for g := range s {
			s[g] = gpu.Sample{At: time.Unix(sec, 0), Index: g, MemMiB: 80 << 10, MemUsedMiB: int64(i), UtilPct: 50}
		}
		ts.cfg.Telemetry.Record(fmt.Sprintf("m%03d", i), s)
	}
}

// A viewer of the gpus topic sees every one of many machines within two
// seconds, though they report one at a time, and gets at most one update
// a second.
func TestLiveStreamSeesEveryMachine(t *testing.T) {
	ts, url := manyMachines(t, liveMachines, 2)
	c, _, err := websocket.DefaultDialer.Dial(url+"?topics=gpus", http.Header{"Authorization": {"Bearer " + ts.tokens["alice"]}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readUntil(t, c, func(m wsMsg) bool { return m.Type == "snapshot" })

	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for sec := int64(1_000_000); ; sec++ {
			report(ts, liveMachines, 2, sec)
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	seen, updates := make(map[string]bool), 0
	start := time.Now()
	deadline := start.Add(2500 * time.Millisecond)
	_ = c.SetReadDeadline(deadline)
	for len(seen) < liveMachines {
		var m wsMsg
		if err := c.ReadJSON(&m); err != nil {
			t.Fatalf("after %d updates in %s, the viewer saw %d of %d machines: %v", updates, time.Since(start), len(seen), liveMachines, err)
		}
		if m.Type != "update" {
			continue
		}
		updates++
		var series []api.GPUSeries
		if err := json.Unmarshal(m.Data, &series); err != nil {
			t.Fatal(err)
		}
		for _, s := range series {
			seen[s.Node] = true
		}
	}
	// Keep reading to the end of the window: the rate cap holds.
	for {
		var m wsMsg
		if err := c.ReadJSON(&m); err != nil {
			break
		}
		if m.Type == "update" {
			updates++
		}
	}
	if limit := 4; updates > limit {
		t.Errorf("%d gpus updates in 2.5 s: want at most one a second (%d)", updates, limit)
	}
}

// Every machine's samples reach the GPU history, however many machines
// report: a minute of 60 samples a second from each, paced faster than
// real time, keeps 60 samples per machine. GPUPORTAL_SCALE_MACHINES sets
// the number of machines for runs by hand (500 for the figure).
func TestHistoryKeepsEveryMachine(t *testing.T) {
	n := liveMachines
	if v := os.Getenv("GPUPORTAL_SCALE_MACHINES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("GPUPORTAL_SCALE_MACHINES=%q: want a number of machines", v)
		}
	}
	ts, _ := manyMachines(t, n, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ts.RecordHistory(ctx, HistoryConfig{}); close(done) }()
	time.Sleep(100 * time.Millisecond) // let the writer subscribe
	start := time.Now().Add(-5 * time.Minute).Truncate(time.Minute).Unix()
	for sec := start; sec <= start+60; sec++ {
		report(ts, n, 1, sec)
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	rows, err := ts.store.GPUHistoryRange(context.Background(), "", start, start+1)
	if err != nil {
		t.Fatal(err)
	}
	kept, short := 0, 0
	for _, r := range rows {
		kept += r.Samples
		if r.Samples != 60 {
			short++
		}
	}
	t.Logf("%d machines: %d rows for the minute, %.1f samples kept per machine per minute, %d machines short", n, len(rows), float64(kept)/float64(n), short)
	if len(rows) != n || short != 0 {
		t.Errorf("%d of %d machines have the minute, %d of them with fewer than 60 samples", len(rows), n, short)
	}
}
