package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
)

// TestFollowerChartsAreStored: a follower replica holds no live readings
// (machines report to the leader), so its charts' 10 minutes come from
// the history's minute rows the leader wrote, where they came out empty;
// its pages say so and draw them (data-charts="stored"). The leader's
// 10 minutes stay live, per second.
func TestFollowerChartsAreStored(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	fol := followerOf(t, ts, sched.Config{Policy: "fifo"})
	ctx := context.Background()
	now := time.Now()
	started := now.Add(-30 * time.Minute)
	j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 3600, SubmittedAt: started}
	if err := ts.store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.MarkStarted(ctx, j.ID, []string{"node-0:1"}, started); err != nil {
		t.Fatal(err)
	}
	// An hour of minute rows of two GPUs, as the leader's writer leaves
	// them, and 2 minutes ahead: the last 10 minutes hold a row a minute
	// even if the reads cross a minute.
	var rows []models.GPUHistory
	for m := int64(-2); m <= 60; m++ {
		for idx, used := range []float64{100, 700} {
			rows = append(rows, models.GPUHistory{Step: models.StepMinute, Start: now.Unix()/60*60 - m*60, GPU: fmt.Sprint("G", idx),
				Node: "node-0", GPUIndex: idx, Samples: 60, MemMiB: 1024, MemUsedAvgMiB: used, MemUsedMaxMiB: int64(used), BusySamples: 60})
		}
	}
	if err := ts.store.SaveGPUHistory(ctx, rows); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		srv       *testServer
		wantStep  int64
		minPoints int // of each answer: 10 minutes of minute rows, or none live
		stored    bool
	}{
		{"leader: live, per second", ts, 1, 0, false},
		{"follower: the stored minutes", fol, 60, 10, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cl api.ClusterHistory
			rec := tc.srv.do(t, "alice", http.MethodGet, "/api/v1/cluster/history?range=10m", "")
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &cl) != nil {
				t.Fatalf("cluster history: %d %s", rec.Code, rec.Body)
			}
			if cl.Step != tc.wantStep || len(cl.Points) < tc.minPoints || len(cl.Points) > 11 {
				t.Errorf("cluster history step %d, %d points; want step %d, %d to 11", cl.Step, len(cl.Points), tc.wantStep, tc.minPoints)
			}
			for _, p := range cl.Points {
				if p.GPUs != 2 || p.BusyGPUs != 2 || p.MemUsedMiB != 800 {
					t.Errorf("cluster point %+v, want 2 GPUs busy, 800 MiB used", p)
					break
				}
			}
			var gs []api.GPUHistory
			rec = tc.srv.do(t, "alice", http.MethodGet, "/cluster/gpus/history?range=10m", "")
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &gs) != nil {
				t.Fatalf("GPU history: %d %s", rec.Code, rec.Body)
			}
			if tc.stored && (len(gs) != 2 || gs[1].Step != 60 || len(gs[1].Points) < 10 || gs[1].Points[0].MemUsedAvgMiB != 700) {
				t.Errorf("GPU history %+v, want both GPUs' minutes", gs)
			}
			if !tc.stored && len(gs) != 0 {
				t.Errorf("GPU history %+v, want none: no GPU is connected to the leader", gs)
			}
			var mem []api.JobMemory
			rec = tc.srv.do(t, "alice", http.MethodGet, fmt.Sprintf("/jobs/%d/memory?range=10m", j.ID), "")
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &mem) != nil {
				t.Fatalf("job memory: %d %s", rec.Code, rec.Body)
			}
			if tc.stored && (len(mem) < 10 || mem[0].MemMiB != 700 || mem[0].GPU != 1) {
				t.Errorf("job memory %+v, want its GPU's minutes", mem)
			}
			for _, target := range []string{"/cluster", fmt.Sprintf("/jobs/%d", j.ID)} {
				page := tc.srv.do(t, "alice", http.MethodGet, target, "").Body.String()
				if got := strings.Contains(page, `data-charts="stored"`) && strings.Contains(page, `id="stored-charts"`); got != tc.stored {
					t.Errorf("%s draws stored charts: %v, want %v", target, got, tc.stored)
				}
				// The stored wall has no GPU detail to open.
				if target == "/cluster" && strings.Contains(page, "Click a GPU's chart") == tc.stored {
					t.Errorf("%s offers a GPU's detail: %v, want %v", target, !tc.stored, !tc.stored)
				}
			}
		})
	}
}
