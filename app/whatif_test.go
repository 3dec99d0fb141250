package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/core/whatif"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestWhatIfHistory: the jobs that succeeded or failed in the window,
// having run, become records with their submit, first start, finish and
// time run; cancelled, unfinished and older jobs are left out; the GPUs
// come from the history and the runs' placements.
func TestWhatIfHistory(t *testing.T) {
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, err := models.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
		// life runs a job: submitted at submit, then each run as
		// [start, end) on placement, the last one ending in state end.
		life := func(name, team string, gpus, submit int, end models.JobState, runs ...[2]int) int64 {
			t.Helper()
			j := &models.Job{Name: name, Team: team, User: "alice", GPUs: gpus, SubmittedAt: at(submit), TimeLimitS: 3600}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			for i, r := range runs {
				pl := []string{"a1:0"}
				if gpus == 2 {
					pl = []string{"a1:0", "a1:1"}
				}
				run, err := s.MarkStarted(ctx, j.ID, pl, at(r[0]))
				if err != nil {
					t.Fatal(err)
				}
				to := models.JobPreempted
				if i == len(runs)-1 {
					to = end
				}
				if to == "" {
					continue // still running
				}
				if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run}, to, nil, "", usage.Service{}, at(r[1])); err != nil {
					t.Fatal(err)
				}
			}
			return j.ID
		}
		preempted := life("preempted", "vision", 2, 0, models.JobSucceeded, [2]int{10, 40}, [2]int{100, 160})
		failed := life("failed", "nlp", 1, 5, models.JobFailed, [2]int{5, 25})
		life("cancelled", "nlp", 1, 6, models.JobCancelled, [2]int{6, 30})
		life("older", "nlp", 1, -7200, models.JobSucceeded, [2]int{-7200, -3600})
		life("running", "nlp", 1, 7, "", [2]int{8, 0})
		if err := s.SaveGPUHistory(ctx, []models.GPUHistory{{Step: models.StepMinute, Start: at(60).Unix(), GPU: "GPU-n1-2", Node: "n1", GPUIndex: 2, MemMiB: 16384, Samples: 60}}); err != nil {
			t.Fatal(err)
		}

		recs, err := app.WhatIfHistory(ctx, s, at(-1800), 100)
		if err != nil {
			t.Fatal(err)
		}
		want := []whatif.Record{
			{ID: preempted, Name: "preempted", Team: "vision", User: "alice", GPUs: 2, GPUMilli: 1000, TimeLimitS: 3600,
				Submitted: at(0), Started: at(10), Finished: at(160), ExecutedS: 90, Preemptions: 1},
			{ID: failed, Name: "failed", Team: "nlp", User: "alice", GPUs: 1, GPUMilli: 1000, TimeLimitS: 3600,
				Submitted: at(5), Started: at(5), Finished: at(25), ExecutedS: 20},
		}
		if len(recs) != len(want) {
			t.Fatalf("records: %+v\nwant %+v", recs, want)
		}
		for i := range want {
			g, w := recs[i], want[i]
			if g.ID != w.ID || g.Name != w.Name || g.Team != w.Team || g.GPUs != w.GPUs || g.GPUMilli != w.GPUMilli ||
				g.TimeLimitS != w.TimeLimitS || !g.Submitted.Equal(w.Submitted) || !g.Started.Equal(w.Started) ||
				!g.Finished.Equal(w.Finished) || g.ExecutedS != w.ExecutedS || g.Preemptions != w.Preemptions {
				t.Errorf("record %d:\n got %+v\nwant %+v", i, g, w)
			}
		}
		// As trace rows: submits from the first, durations the time run.
		jobs, _ := whatif.Trace(recs)
		wantJobs := []trace.Job{
			{ID: preempted, Name: "preempted", Submit: 0, Duration: 90, GPUs: 2, GPUMilli: 1000, Team: "vision", User: "alice", TimeLimitS: 3600},
			{ID: failed, Name: "failed", Submit: 5, Duration: 20, GPUs: 1, GPUMilli: 1000, Team: "nlp", User: "alice", TimeLimitS: 3600},
		}
		for i := range wantJobs {
			if jobs[i] != wantJobs[i] {
				t.Errorf("trace row %d: %+v, want %+v", i, jobs[i], wantJobs[i])
			}
		}
		// The limit keeps the most recently finished.
		if recs, err := app.WhatIfHistory(ctx, s, at(-1800), 1); err != nil || len(recs) != 1 || recs[0].ID != preempted {
			t.Errorf("limit 1: %+v, %v; want the preempted job", recs, err)
		}

		gpus, err := app.GPUsSeen(ctx, s, at(-1800))
		if err != nil {
			t.Fatal(err)
		}
		nodes := whatif.Nodes(gpus)
		wantNodes := []trace.Node{{Name: "a1", GPUs: 2}, {Name: "n1", GPUs: 3, GPUMemMiB: 16384}}
		if len(nodes) != 2 || nodes[0] != wantNodes[0] || nodes[1] != wantNodes[1] {
			t.Errorf("nodes = %+v, want %+v", nodes, wantNodes)
		}
	})
}
