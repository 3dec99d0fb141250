package web

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/models"
)

// BenchmarkIdleStates measures the idle verdicts of the cluster page: 1,024
// running jobs, one per GPU of 128 machines, with an hour of minute history
// each (the lookback of the default 30-minute rule) and no live readings;
// "fresh" judges every job anew (what the cache saves once per
// idleCacheTTL), "cached" reuses the verdicts of the last 10 seconds.
//
//	go test -run '^$' -bench IdleStates -benchtime 10x ./web
func BenchmarkIdleStates(b *testing.B) {
	ts := newTestServer(b, func(c *testConfig) { c.App.Idle = idle.DefaultRule })
	ctx := context.Background()
	now := time.Now()
	start := now.Add(-2 * time.Hour)
	const machines, perMachine = 128, 8
	var ids []int64
	var rows []models.GPUHistory
	end := now.Unix() - now.Unix()%60
	for n := range machines {
		for g := range perMachine {
			node := fmt.Sprintf("node-%d", n)
			j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 1e6, SubmittedAt: start}
			if err := ts.store.CreateJob(ctx, j); err != nil {
				b.Fatal(err)
			}
			if _, err := ts.store.MarkStarted(ctx, j.ID, []string{fmt.Sprintf("%s:%d", node, g)}, start); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, j.ID)
			for m := 62; m > 0; m-- {
				util := 90.0
				if g == 0 {
					util = 1 // one idle GPU per machine
				}
				rows = append(rows, models.GPUHistory{Step: models.StepMinute, Start: end - int64(m)*60, GPU: fmt.Sprintf("GPU-%s-%d", node, g),
					Node: node, GPUIndex: g, Samples: 60, MemMiB: 81920, MemUsedAvgMiB: 1000, MemUsedMaxMiB: 1000, UtilAvgPct: util, BusySamples: 60})
			}
		}
	}
	if err := ts.store.SaveGPUHistory(ctx, rows); err != nil {
		b.Fatal(err)
	}
	shown := appJobs(b, ts.app, ids...)
	js := make([]*app.Job, len(shown))
	for i := range shown {
		js[i] = &shown[i]
	}
	var flip bool
	for _, fresh := range []bool{true, false} {
		name := map[bool]string{true: "fresh", false: "cached"}[fresh]
		b.Run(name, func(b *testing.B) {
			for range b.N {
				at := now
				if fresh {
					// Each verdict 11 seconds earlier or later than the
					// last: past the cache's 10 seconds, either way.
					if flip = !flip; flip {
						at = now.Add(-11 * time.Second)
					}
				}
				st, err := ts.app.IdleStates(ctx, js, at)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for _, v := range st {
					if v.Idle {
						n++
					}
				}
				if n != machines {
					b.Fatalf("%d idle jobs, want %d", n, machines)
				}
			}
		})
	}
}
