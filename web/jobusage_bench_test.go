package web

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	ts := newTestServer(b, func(c *Config) { c.Idle = idle.DefaultRule })
	ctx := context.Background()
	now := time.Now()
	start := now.Add(-2 * time.Hour)
	const machines, perMachine = 128, 8
	var js []*models.Job
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
			j, _ = ts.store.Job(ctx, j.ID)
			js = append(js, j)
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
	for _, fresh := range []bool{true, false} {
		name := map[bool]string{true: "fresh", false: "cached"}[fresh]
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if fresh {
					ts.idle.m = nil
				}
				st, err := ts.idleStates(ctx, js, now)
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
