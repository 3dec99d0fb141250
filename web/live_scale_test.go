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
	"github.com/gpuportal/gpuportal/models"
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
		if err := ts.engine.AddNode(context.Background(), a); err != nil {
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
		var u api.GPUsUpdate
		if err := json.Unmarshal(m.Data, &u); err != nil {
			t.Fatal(err)
		}
		for _, n := range u.Nodes {
			seen[n.Node] = true
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
	go func() { ts.history.Run(ctx); close(done) }()
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

// queueJobs stores n waiting jobs of team vision.
func queueJobs(t testing.TB, ts *testServer, n int) {
	t.Helper()
	js := make([]*models.Job, n)
	for i := range js {
		js[i] = &models.Job{Name: fmt.Sprint("q", i), Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Unix(int64(1000+i), 0)}
	}
	if err := ts.store.CreateJobs(context.Background(), js); err != nil {
		t.Fatal(err)
	}
}

// The queues topic sends each queue's counts and first page, at most
// once a second, however long the queue and however often machines
// report; the rest of a queue is read a page at a time from the API.
// GPUPORTAL_SCALE_QUEUED sets the queue for runs by hand (10000 for the
// issue's figure); the test logs the bytes a viewer gets per second.
func TestQueuesTopicAtScale(t *testing.T) {
	queued := 1000
	if v := os.Getenv("GPUPORTAL_SCALE_QUEUED"); v != "" {
		var err error
		if queued, err = strconv.Atoi(v); err != nil || queued < 1 {
			t.Fatalf("GPUPORTAL_SCALE_QUEUED=%q: want a number of jobs", v)
		}
	}
	const machines = 16
	ts, url := manyMachines(t, machines, 1)
	queueJobs(t, ts, queued)
	c, _, err := websocket.DefaultDialer.Dial(url+"?topics=queues", http.Header{"Authorization": {"Bearer " + ts.tokens["alice"]}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	snap := readUntil(t, c, func(m wsMsg) bool { return m.Type == "snapshot" })
	var q api.Queues
	if err := json.Unmarshal(snap.Data, &q); err != nil {
		t.Fatal(err)
	}
	total, listed := 0, 0
	for _, qu := range q.Queues {
		total += qu.Total
		listed += len(qu.Jobs)
	}
	if total != queued || listed > queueTopicPage*len(q.Queues) {
		t.Fatalf("snapshot counts %d jobs and lists %d; want %d counted, at most %d listed", total, listed, queued, queueTopicPage*len(q.Queues))
	}

	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for sec := int64(1_000_000); ; sec++ {
			report(ts, machines, 1, sec)
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	const window = 3 * time.Second
	_ = c.SetReadDeadline(time.Now().Add(window))
	bytes, updates := 0, 0
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			break
		}
		bytes += len(b)
		updates++
	}
	t.Logf("%d queued: %d queues updates in %s, %.1f kB/s per viewer", queued, updates, window, float64(bytes)/window.Seconds()/1000)
	if updates > 4 {
		t.Errorf("%d queues updates in %s: want at most one a second", updates, window)
	}

	// The rest of the queue, a page at a time.
	rec := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/api/v1/queues?queue=%d&offset=%d&limit=100", q.Queues[0].Index, queueTopicPage), "")
	var page api.Queues
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &page) != nil || len(page.Queues) != 1 ||
		page.Queues[0].Offset != queueTopicPage || len(page.Queues[0].Jobs) != min(100, q.Queues[0].Total-queueTopicPage) {
		t.Fatalf("page: %d %.300s", rec.Code, rec.Body.String())
	}
}

func TestQueuesAPIPages(t *testing.T) {
	ts := newTestServer(t)
	queueJobs(t, ts, 30)
	for _, tc := range []struct {
		query string
		code  int
		jobs  int // in the first queue answered
		field string
	}{
		{"", http.StatusOK, 30, ""},
		{"?limit=10", http.StatusOK, 10, ""},
		{"?offset=25&limit=10", http.StatusOK, 5, ""},
		{"?offset=40", http.StatusOK, 0, ""},
		{"?queue=0", http.StatusOK, 30, ""},
		{"?queue=99", http.StatusBadRequest, 0, "queue"},
		{"?offset=-1", http.StatusBadRequest, 0, "offset"},
		{"?limit=0", http.StatusBadRequest, 0, "limit"},
		{"?limit=many", http.StatusBadRequest, 0, "limit"},
	} {
		rec := ts.do(t, "alice", http.MethodGet, "/api/v1/queues"+tc.query, "")
		if rec.Code != tc.code {
			t.Errorf("%s: status %d, want %d: %s", tc.query, rec.Code, tc.code, rec.Body.String())
			continue
		}
		if tc.code != http.StatusOK {
			if !strings.Contains(rec.Body.String(), tc.field+":") {
				t.Errorf("%s: %s does not name %s", tc.query, rec.Body.String(), tc.field)
			}
			continue
		}
		var q api.Queues
		if err := json.Unmarshal(rec.Body.Bytes(), &q); err != nil || len(q.Queues) == 0 {
			t.Fatalf("%s: %v %s", tc.query, err, rec.Body.String())
		}
		total := 0
		for _, qu := range q.Queues {
			total += qu.Total
		}
		if got := len(q.Queues[0].Jobs); got != tc.jobs || total != 30 {
			t.Errorf("%s: %d jobs listed, %d counted; want %d, 30", tc.query, got, total, tc.jobs)
		}
	}
}

// /metrics counts the rows the store wrote and says how the live stream
// and the history writer keep up.
func TestScaleMetrics(t *testing.T) {
	ts := newTestServer(t)
	queueJobs(t, ts, 7)
	body := ts.do(t, "anonymous", http.MethodGet, "/metrics", "").Body.String()
	for _, want := range []string{
		`gpuportal_store_rows_written_total{kind="job"} 7`,
		`gpuportal_store_rows_written_total{kind="gpu_history"} 0`,
		"gpuportal_live_reports_dropped_total 0",
		"gpuportal_history_reports_dropped_total 0",
		"gpuportal_live_update_age_seconds",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// BenchmarkLiveMachines has machines report one at a time, each once a
// second, for 3 s per iteration to one viewer of the gpus topic, and
// reports how many distinct machines the viewer saw in that window (all
// of them, since the stream coalesces per GPU), its updates per second
// and its bytes per second.
//
//	go test -run '^$' -bench LiveMachines -benchtime 1x ./web
func BenchmarkLiveMachines(b *testing.B) {
	for _, n := range []int{128, 500} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			ts, url := manyMachines(b, n, 8)
			c, _, err := websocket.DefaultDialer.Dial(url+"?topics=gpus", http.Header{"Authorization": {"Bearer " + ts.tokens["alice"]}})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { c.Close() }()
			var snap wsMsg
			if err := c.ReadJSON(&snap); err != nil {
				b.Fatal(err)
			}
			const window = 3 * time.Second
			var seen, updates, bytes float64
			for i := range b.N {
				stop := make(chan struct{})
				go func() {
					for sec := int64(2_000_000 + i*10); ; sec++ {
						report(ts, n, 8, sec)
						select {
						case <-stop:
							return
						case <-time.After(time.Second):
						}
					}
				}()
				nodes := make(map[string]bool)
				_ = c.SetReadDeadline(time.Now().Add(window))
				for {
					_, raw, err := c.ReadMessage()
					if err != nil {
						break
					}
					var m wsMsg
					if json.Unmarshal(raw, &m) != nil || m.Type != "update" {
						continue
					}
					updates++
					bytes += float64(len(raw))
					var u api.GPUsUpdate
					if err := json.Unmarshal(m.Data, &u); err != nil {
						b.Fatal(err)
					}
					for _, n := range u.Nodes {
						nodes[n.Node] = true
					}
				}
				close(stop)
				seen += float64(len(nodes))
				// The connection is done after its deadline: a new one.
				c.Close()
				if c, _, err = websocket.DefaultDialer.Dial(url+"?topics=gpus", http.Header{"Authorization": {"Bearer " + ts.tokens["alice"]}}); err != nil {
					b.Fatal(err)
				}
				if err := c.ReadJSON(&snap); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(seen/float64(b.N), "machines-seen")
			b.ReportMetric(updates/float64(b.N)/window.Seconds(), "updates/s")
			b.ReportMetric(bytes/float64(b.N)/window.Seconds()/1000, "kB/s")
		})
	}
}

// A job:<id> topic is sent at most once a second, as documented, though
// the job's GPUs are on many machines that report one at a time.
func TestJobTopicRate(t *testing.T) {
	const machines = 16
	ts, url := manyMachines(t, machines, 1)
	queueJobs(t, ts, 1)
	js, err := ts.store.ListJobs(context.Background(), models.JobFilter{})
	if err != nil || len(js) != 1 {
		t.Fatalf("jobs %v, %v", js, err)
	}
	id := js[0].ID
	c, _, err := websocket.DefaultDialer.Dial(url+fmt.Sprintf("?topics=job:%d", id), http.Header{"Authorization": {"Bearer " + ts.tokens["alice"]}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readUntil(t, c, func(m wsMsg) bool { return m.Type == "snapshot" })
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for sec := int64(1_000_000); ; sec++ {
			for i := range machines {
				ts.cfg.Telemetry.Record(fmt.Sprintf("m%03d", i), []gpu.Sample{{At: time.Unix(sec, 0), MemMiB: 80 << 10,
					MemUsedMiB: sec % 1000, Jobs: []gpu.JobMem{{JobID: id, MemMiB: sec % 1000}}}})
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(2500 * time.Millisecond))
	updates, nodes := 0, make(map[string]bool)
	for {
		var m wsMsg
		if err := c.ReadJSON(&m); err != nil {
			break
		}
		if m.Type != "update" {
			continue
		}
		updates++
		var u api.JobUpdate
		if err := json.Unmarshal(m.Data, &u); err != nil {
			t.Fatal(err)
		}
		if u.Job.ID != id || u.Job.State == "" {
			t.Errorf("job:%d update carries job %d in state %q", id, u.Job.ID, u.Job.State)
		}
		for _, p := range u.Memory {
			nodes[p.Node] = true
		}
	}
	if updates < 1 || updates > 4 {
		t.Errorf("%d job updates in 2.5 s: want one a second", updates)
	}
	if len(nodes) != machines {
		t.Errorf("the job's memory came from %d of its %d machines", len(nodes), machines)
	}
}
