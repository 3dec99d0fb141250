package web

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/models"
)

// fakeLaneNode is a machine whose gate holds fixed lanes. It reports
// the runs the test started on it as running, so the engine's reconcile
// keeps them running while the test reads their pages.
type fakeLaneNode struct {
	lanes []lanes.GPUView
	runs  []job.RunRef
}

func (n *fakeLaneNode) Name() string { return "lanes-0" }
func (n *fakeLaneNode) Devices() []gpu.Device {
	return []gpu.Device{{Index: 0, UUID: "GPU-l0", MemMiB: 16384}, {Index: 1, UUID: "GPU-l1", MemMiB: 16384}}
}
func (n *fakeLaneNode) Resources() (int, int64) { return 8, 64 << 10 }
func (n *fakeLaneNode) Start(context.Context, job.Spec) error {
	return fmt.Errorf("fake node runs nothing")
}
func (n *fakeLaneNode) Stop(context.Context, job.RunRef) error { return nil }
func (n *fakeLaneNode) Running() []job.RunRef                  { return n.runs }
func (n *fakeLaneNode) Sample(time.Time) []gpu.Sample          { return nil }
func (n *fakeLaneNode) Lanes() []lanes.GPUView                 { return n.lanes }

func TestLanesInTheAPI(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	var runs []job.RunRef
	mk := func(name string) int64 {
		j := &models.Job{Name: name, Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Now(),
			Sharing: true, MemPersistentMiB: 1000, MemEphemeralMiB: 7000, MemSource: "declared"}
		if err := ts.store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		run, err := ts.store.MarkStarted(ctx, j.ID, []string{"lanes-0:0"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, job.RunRef{Job: j.ID, Run: run})
		return j.ID
	}
	a, b, c := mk("a"), mk("b"), mk("c")
	held := memest.Estimate{PersistentMiB: 1100, EphemeralMiB: 7405, Source: memest.Declared}
	small := memest.Estimate{PersistentMiB: 1100, EphemeralMiB: 1000, Source: memest.Measured}
	node := &fakeLaneNode{runs: runs, lanes: []lanes.GPUView{
		{Index: 0, CapacityMiB: 16384, UsedMiB: 3300 + 7405 + 1000, PersistentMiB: 3300, Lanes: []lanes.LaneView{
			{ID: 1, SizeMiB: 7405, Running: b, Jobs: []lanes.JobView{{ID: a, Memory: held}, {ID: b, Memory: held, Running: true}}},
			{ID: 2, SizeMiB: 1000, Jobs: []lanes.JobView{{ID: c, Memory: small, MaxPeakMiB: 900, Iterations: 4}}},
		}},
		{Index: 1, CapacityMiB: 16384},
	}}
	if err := ts.engine.AddNode(ctx, node); err != nil {
		t.Fatal(err)
	}

	rec := ts.do(t, "admin", http.MethodGet, "/api/v1/gpus", "")
	var gpus []api.GPUSeries
	if err := json.Unmarshal(rec.Body.Bytes(), &gpus); err != nil || len(gpus) != 2 {
		t.Fatalf("GET /api/v1/gpus: %v, %s", err, rec.Body)
	}
	l := gpus[0].Lanes
	if l == nil || len(l.Lanes) != 2 || l.Lanes[0].Running != b || l.Lanes[1].Jobs[0].MaxPeakMiB != 900 || l.PersistentMiB != 3300 {
		t.Fatalf("GPU 0 lanes %+v", l)
	}
	if gpus[1].Lanes == nil || len(gpus[1].Lanes.Lanes) != 0 {
		t.Fatalf("GPU 1, no lanes: %+v", gpus[1].Lanes)
	}

	tests := []struct {
		job              int64
		lane             int
		laneJobs, beside []int64
		page             string
	}{
		{a, 1, []int64{b}, []int64{c}, fmt.Sprintf("lane 1 of lanes-0 GPU 0 (7405 MiB); takes turns with job %d; beside job %d in other lanes", b, c)},
		{c, 2, []int64{}, []int64{a, b}, fmt.Sprintf("alone in its lane; beside jobs %d, %d in other lanes; "+
			"holds P 1100 MiB + E 1000 MiB (measured, padded); 4 iterations, largest measured ephemeral peak 900 MiB", a, b)},
	}
	for _, tc := range tests {
		var j api.Job
		rec := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", tc.job), "")
		if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
			t.Fatal(err)
		}
		if j.Lane == nil || j.Lane.Lane != tc.lane || fmt.Sprint(j.Lane.LaneJobs) != fmt.Sprint(tc.laneJobs) || fmt.Sprint(j.Lane.GPUJobs) != fmt.Sprint(tc.beside) {
			t.Fatalf("job %d lane %+v, want lane %d with %v beside %v", tc.job, j.Lane, tc.lane, tc.laneJobs, tc.beside)
		}
		page := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/jobs/%d", tc.job), "").Body.String()
		if !containsText(page, tc.page) {
			t.Fatalf("job %d's page lacks %q", tc.job, tc.page)
		}
	}
	if got, want := lanesText(*l), fmt.Sprintf("persistent 3.2 GB · lane 1: 7.2 GB, jobs %d, %d (job %d runs) · lane 2: 1.0 GB, job %d", a, b, b, c); got != want {
		t.Fatalf("lanesText = %q, want %q", got, want)
	}
}

// containsText reports whether an HTML page holds s, as templ escapes it.
func containsText(page, s string) bool {
	return s != "" && strings.Contains(page, html.EscapeString(s))
}
