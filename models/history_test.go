package models

import (
	"context"
	"math"
	"testing"
)

func minuteRow(uuid string, start int64, used float64, power *float64) GPUHistory {
	return GPUHistory{Step: StepMinute, Start: start, GPU: uuid, Node: "n0", GPUIndex: 1, Samples: 60, MemMiB: 1000,
		MemUsedAvgMiB: used, MemUsedMaxMiB: int64(used) + 10, UtilAvgPct: 50, BusySamples: 30, PowerAvgW: power}
}

func TestGPUHistoryStore(t *testing.T) {
	t.Parallel()
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		w := 250.0
		// Two GPUs, the first three minutes of hour 1 and one minute of hour 2.
		var rows []GPUHistory
		for _, st := range []int64{3600, 3660, 3720, 7200} {
			rows = append(rows, minuteRow("GPU-a", st, float64(st/60), &w), minuteRow("GPU-b", st, 0, nil))
		}
		if err := s.SaveGPUHistory(ctx, rows); err != nil {
			t.Fatal(err)
		}
		got, err := s.GPUHistoryRange(ctx, "GPU-a", 3600, 7200)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Start != 3600 || got[0].PowerAvgW == nil || *got[0].PowerAvgW != 250 || got[0].Node != "n0" || got[0].GPUIndex != 1 {
			t.Fatalf("GPU-a in hour 1 = %+v", got)
		}
		if all, _ := s.GPUHistoryRange(ctx, "", 0, 1<<40); len(all) != 8 {
			t.Errorf("every GPU: %d rows, want 8", len(all))
		}

		// A minute written again (a restart within it) merges with the first.
		again := minuteRow("GPU-a", 3600, 120, &w)
		again.Samples, again.MemUsedMaxMiB, again.Node = 20, 5000, "n9"
		if err := s.SaveGPUHistory(ctx, []GPUHistory{again}); err != nil {
			t.Fatal(err)
		}
		got, _ = s.GPUHistoryRange(ctx, "GPU-a", 3600, 3660)
		if len(got) != 1 || got[0].Samples != 80 || math.Abs(got[0].MemUsedAvgMiB-(60*60+120*20)/80.0) > 1e-9 ||
			got[0].MemUsedMaxMiB != 5000 || got[0].Node != "n9" {
			t.Errorf("merged minute = %+v", got)
		}

		cl, err := s.ClusterGPUHistory(ctx, 3600, 3660)
		if err != nil {
			t.Fatal(err)
		}
		if len(cl) != 1 || cl[0].GPUs != 2 || math.Abs(cl[0].BusyGPUs-(60.0/80+0.5)) > 1e-9 || cl[0].MemMiB != 2000 {
			t.Errorf("cluster minute = %+v", cl)
		}

		// Rolling up before 7230 rolls hour 1 only: its hour is complete.
		n, err := s.RollupGPUHistory(ctx, 7230)
		if err != nil {
			t.Fatal(err)
		}
		if n != 6 {
			t.Errorf("rolled up %d minutes, want 6", n)
		}
		got, _ = s.GPUHistoryRange(ctx, "GPU-a", 0, 1<<40)
		if len(got) != 2 || got[0].Step != StepHour || got[0].Start != 3600 || got[0].Samples != 200 || got[1].Step != StepMinute {
			t.Fatalf("after the roll-up = %+v", got)
		}
		if want := (80*(60*60+120*20)/80.0 + 61*60 + 62*60) / 200; math.Abs(got[0].MemUsedAvgMiB-want) > 1e-9 || got[0].MemUsedMaxMiB != 5000 {
			t.Errorf("hour avg %v max %d, want %v and 5000", got[0].MemUsedAvgMiB, got[0].MemUsedMaxMiB, want)
		}
		if b, _ := s.GPUHistoryRange(ctx, "GPU-b", 0, 1<<40); len(b) != 2 || b[0].PowerAvgW != nil {
			t.Errorf("GPU-b after the roll-up = %+v (power unknown stays NULL)", b)
		}
		if n, err := s.RollupGPUHistory(ctx, 7230); err != nil || n != 0 {
			t.Errorf("second roll-up: %d, %v; want nothing left to do", n, err)
		}

		if err := s.SaveClusterHistory(ctx, ClusterHistory{Start: 3600, Queued: 3, Running: 2}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveClusterHistory(ctx, ClusterHistory{Start: 3600, Queued: 4, Running: 2}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveClusterHistory(ctx, ClusterHistory{Start: 7200, Preempted: 1}); err != nil {
			t.Fatal(err)
		}
		ch, err := s.ClusterHistoryRange(ctx, 0, 1<<40)
		if err != nil || len(ch) != 2 || ch[0].Queued != 4 || ch[1].Preempted != 1 {
			t.Errorf("cluster history = %+v, %v", ch, err)
		}

		// Pruning before hour 2 leaves hour 2's minute of each GPU and its cluster minute.
		pruned, err := s.PruneHistory(ctx, 7200)
		if err != nil {
			t.Fatal(err)
		}
		if pruned != 3 {
			t.Errorf("pruned %d rows, want 3 (two hours and a cluster minute)", pruned)
		}
		if all, _ := s.GPUHistoryRange(ctx, "", 0, 1<<40); len(all) != 2 || all[0].Start != 7200 {
			t.Errorf("after pruning = %+v", all)
		}
	})
}
