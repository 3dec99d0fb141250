package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestHistoryIsWrittenAndServed records two minutes of samples through the
// history writer, then reads them back through the API at each range.
func TestHistoryIsWrittenAndServed(t *testing.T) {
	ls := newLiveServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ls.history.Run(ctx); close(done) }()
	// Let the writer subscribe before the frames come.
	time.Sleep(100 * time.Millisecond)
	now := time.Now()
	start := now.Add(-3 * time.Minute).Truncate(time.Minute)
	for s := range 121 {
		at := start.Add(time.Duration(s) * time.Second)
		smp := []gpu.Sample{{At: at, Index: 0, MemUsedMiB: 512, MemMiB: 1024, UtilPct: 40, PowerW: 100, TempC: 50,
			Jobs: []gpu.JobMem{{JobID: 1, MemMiB: 512}}}, {At: at, Index: 1, MemMiB: 1024}}
		// Job 1 is placed on GPU 0 (busy); GPU 1 has none (idle).
		held := map[gpu.Ref][]int64{{Node: "node-0", Index: 0}: {1}}
		ls.cfg.Telemetry.RecordHeld("node-0", smp, held) // the writer may fall 120 frames behind
	}
	var rows []models.GPUHistory
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var err error
		if rows, err = ls.store.GPUHistoryRange(context.Background(), "", 0, 1<<40); err != nil {
			t.Fatal(err)
		}
		jobs, err := ls.store.ClusterHistoryRange(context.Background(), 0, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) >= 4 && len(jobs) >= 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done // flushes the minute in progress
	rows, _ = ls.store.GPUHistoryRange(context.Background(), "", 0, 1<<40)
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6 (two GPUs, two whole minutes and one second): %+v", len(rows), rows)
	}
	var g0 []models.GPUHistory
	for _, r := range rows {
		if r.GPU == ls.gpus[0].UUID {
			g0 = append(g0, r)
		}
	}
	if len(g0) != 3 || g0[0].Samples < 55 || g0[0].MemUsedAvgMiB != 512 || g0[0].BusySamples != g0[0].Samples ||
		g0[0].PowerAvgW == nil || *g0[0].PowerAvgW != 100 || g0[2].Samples != 1 {
		t.Errorf("GPU 0 rows = %+v", g0)
	}
	if jobs, _ := ls.store.ClusterHistoryRange(context.Background(), 0, 1<<40); len(jobs) != 2 {
		t.Errorf("cluster history = %+v, want one row per closed minute", jobs)
	}

	// One GPU, one hour: minute points.
	rec := ls.do(t, "bob", http.MethodGet, "/api/v1/gpus/"+ls.gpus[0].UUID+"/history?range=1h", "")
	var one api.GPUHistory
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &one) != nil {
		t.Fatalf("1h: %d %s", rec.Code, rec.Body)
	}
	if one.UUID != ls.gpus[0].UUID || one.Step != 60 || len(one.Points) != 3 || one.Points[0].BusyPct != 100 || one.Points[0].TempAvgC == nil {
		t.Errorf("1h = %+v", one)
	}
	// Every GPU over 24 hours: five-minute points (one here, or two across a boundary).
	rec = ls.do(t, "alice", http.MethodGet, "/api/v1/gpus/history?range=24h", "")
	var all []api.GPUHistory
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &all) != nil || len(all) != 2 {
		t.Fatalf("24h: %d %s", rec.Code, rec.Body)
	}
	if n := len(all[1].Points); all[1].Step != 300 || n < 1 || n > 2 || all[1].Points[0].MemUsedMaxMiB != 0 {
		t.Errorf("24h GPU 1 = %+v", all[1])
	}
	// The cluster over 7 days: hourly points, two GPUs, one busy.
	rec = ls.do(t, "alice", http.MethodGet, "/api/v1/cluster/history?range=7d", "")
	var cl api.ClusterHistory
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &cl) != nil {
		t.Fatalf("cluster 7d: %d %s", rec.Code, rec.Body)
	}
	if len(cl.Points) < 1 || cl.Points[0].GPUs != 2 || cl.Points[0].MemMiB != 2048 || len(cl.Jobs) < 1 {
		t.Errorf("cluster 7d = %+v", cl)
	}
	// The live range reads memory, not the database.
	rec = ls.do(t, "alice", http.MethodGet, "/api/v1/gpus/"+ls.gpus[1].UUID+"/history", "")
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &one) != nil || one.Step != 1 || one.Range != "10m" {
		t.Errorf("default range: %d %s", rec.Code, rec.Body)
	}
}

func TestHistoryRangeIsChecked(t *testing.T) {
	ts := newTestServer(t)
	for _, target := range []string{"/api/v1/gpus/history?range=2y", "/api/v1/cluster/history?range=", "/api/v1/gpus/x/history?range=1d"} {
		rec := ts.do(t, "alice", http.MethodGet, target, "")
		if target == "/api/v1/cluster/history?range=" {
			if rec.Code != http.StatusOK {
				t.Errorf("%s: %d, want the default range", target, rec.Code)
			}
			continue
		}
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "range") {
			t.Errorf("%s: %d %s, want 400 naming range", target, rec.Code, rec.Body)
		}
	}
}

// TestOpenAPIHistorySchemas checks the history objects the document names
// against the JSON the handlers write.
func TestOpenAPIHistorySchemas(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, typ := range map[string]reflect.Type{
		"HistoryPoint":   reflect.TypeOf(api.HistoryPoint{}),
		"GPUHistory":     reflect.TypeOf(api.GPUHistory{}),
		"ClusterHistory": reflect.TypeOf(api.ClusterHistory{}),
	} {
		var fields, props []string
		for i := range typ.NumField() {
			tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if tag != "" && tag != "-" {
				fields = append(fields, tag)
			}
		}
		for p := range doc.Components.Schemas[name].Properties {
			props = append(props, p)
		}
		sort.Strings(fields)
		sort.Strings(props)
		if !reflect.DeepEqual(fields, props) {
			t.Errorf("schema %s has %v; %s writes %v", name, props, typ.Name(), fields)
		}
	}
}

// TestJobMemoryOverLongerRanges reads the history of the GPUs a job ran
// on, while it ran.
func TestJobMemoryOverLongerRanges(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	now := time.Now()
	started, finished := now.Add(-50*time.Minute), now.Add(-20*time.Minute)
	j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: started,
		StartedAt: &started, FinishedAt: &finished, Placement: models.Strings{"node-0:1"}}
	if err := ts.store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	var rows []models.GPUHistory
	for m := int64(0); m < 60; m++ {
		start := now.Unix()/60*60 - m*60
		for idx, used := range []float64{100, 700} {
			rows = append(rows, models.GPUHistory{Step: models.StepMinute, Start: start, GPU: fmt.Sprint("G", idx), Node: "node-0",
				GPUIndex: idx, Samples: 60, MemUsedAvgMiB: used})
		}
	}
	if err := ts.store.SaveGPUHistory(ctx, rows); err != nil {
		t.Fatal(err)
	}
	rec := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/memory?range=1h", j.ID), "")
	var pts []api.JobMemory
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &pts) != nil {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	// Minutes from the one holding the start to the one holding the end, of GPU 1 only.
	if len(pts) < 30 || len(pts) > 32 {
		t.Errorf("%d points, want the 30 or so minutes the job ran", len(pts))
	}
	for _, p := range pts {
		if p.Node != "node-0" || p.GPU != 1 || p.MemMiB != 700 || p.T < started.Unix()/60*60 || p.T > finished.Unix() {
			t.Errorf("point %+v: want GPU node-0:1 at 700 MiB while the job ran", p)
			break
		}
	}
	if rec := ts.do(t, "bob", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/memory?range=1h", j.ID), ""); rec.Code != http.StatusNotFound {
		t.Errorf("bob: %d, want 404 (another team's job does not exist to him)", rec.Code)
	}
}

// TestAccountingOutlivesHistory: the history maintenance closes each day's
// accounting before it prunes the history, so a job's used GPU-hours are
// still reported after its GPU's history is gone.
func TestAccountingOutlivesHistory(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	now := time.Now().UTC()
	day := now.AddDate(0, 0, -95).Truncate(24 * time.Hour)
	start := day.Add(time.Hour)
	j := &models.Job{Name: "old", Team: "vision", User: "alice", GPUs: 1, SimDuration: 7200, SubmittedAt: start}
	if err := ts.store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	run, err := ts.store.MarkStarted(ctx, j.ID, []string{"n1:0"}, start)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.store.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run}, models.JobSucceeded, nil, "", usage.Service{}, start.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var rows []models.GPUHistory
	for m := range 120 {
		rows = append(rows, models.GPUHistory{Step: models.StepMinute, Start: start.Unix() + int64(m)*60, GPU: "G", Node: "n1", GPUIndex: 0, Samples: 60, UtilAvgPct: 60})
	}
	if err := ts.store.SaveGPUHistory(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := ts.history.Maintain(ctx, now); err != nil {
		t.Fatal(err)
	}
	if got, _ := ts.store.GPUHistoryRange(ctx, "", 0, 1<<40); len(got) != 0 {
		t.Fatalf("%d history rows left; want the day pruned", len(got))
	}
	d := day.Format(time.DateOnly)
	rec := ts.do(t, "admin", http.MethodGet, "/api/v1/accounting?by=user&from="+d+"&to="+d, "")
	var rep api.Accounting
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].AllocatedGPUHours != 2 || rep.Rows[0].UsedGPUHours != 1.2 || rep.Rows[0].UnsampledGPUHours != 0 {
		t.Errorf("after the history is pruned: %+v; want 2 GPU-hours allocated, 1.2 used", rep.Rows)
	}
}
