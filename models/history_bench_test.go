package models

import (
	"context"
	"testing"

	"github.com/gpuportal/gpuportal/models/modelstest"
)

// BenchmarkHistoryDisk measures what a GPU-day of history costs on disk:
// it writes one simulated day of 8 GPUs the way the server does (a row
// per GPU and minute, one transaction a minute, and the cluster's job
// counts), measures the tables, rolls the day up into hours as the server
// does past --history-raw and measures again. Reported per GPU-day; the
// cluster's job counts per day, whatever the number of GPUs.
//
//	go test -run '^$' -bench HistoryDisk -benchtime 1x ./models
func BenchmarkHistoryDisk(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchHistoryDisk(b, modelstest.SQLiteDSN(b)) })
	b.Run("postgres", func(b *testing.B) { benchHistoryDisk(b, modelstest.PostgresDSN(b)) })
}

func benchHistoryDisk(b *testing.B, dsn string) {
	ctx := context.Background()
	s, err := Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const gpus, minutes = 8, 24 * 60
	day0 := int64(1_700_006_400) // a midnight, UTC
	var raw, hourly, cluster float64
	for range b.N {
		empty := historyBytes(b, s)
		w := 250.5
		temp := 61.0
		for m := range int64(minutes) {
			rows := make([]GPUHistory, 0, gpus)
			for g := range gpus {
				rows = append(rows, GPUHistory{Step: StepMinute, Start: day0 + m*60, GPU: "GPU-5f1c2e4a-9b7d-4c3e-8a21-0d6f3b9e7c" + string(rune('0'+g)) + "1",
					Node: "node-0", GPUIndex: g, Samples: 60, MemMiB: 81920, MemUsedAvgMiB: 41234.5 + float64(m%97), MemUsedMaxMiB: 60000 + m%89,
					UtilAvgPct: 87.25, BusySamples: 60, PowerAvgW: &w, TempAvgC: &temp})
			}
			if err := s.SaveGPUHistory(ctx, rows); err != nil {
				b.Fatal(err)
			}
		}
		minuteRows := historyBytes(b, s)
		if _, err := s.RollupGPUHistory(ctx, day0+minutes*60); err != nil {
			b.Fatal(err)
		}
		hourRows := historyBytes(b, s)
		for m := range int64(minutes) {
			if err := s.SaveClusterHistory(ctx, ClusterHistory{Start: day0 + m*60, Queued: 12, Running: 30, Preempted: 1}); err != nil {
				b.Fatal(err)
			}
		}
		withCluster := historyBytes(b, s)
		raw = float64(minuteRows.gpu-empty.gpu) / gpus
		hourly = float64(hourRows.gpu-empty.gpu) / gpus
		cluster = float64(withCluster.cluster - hourRows.cluster)
	}
	b.ReportMetric(raw, "B/GPU-day-minutes")
	b.ReportMetric(hourly, "B/GPU-day-hours")
	b.ReportMetric(cluster, "B/day-cluster")
}

type tableBytes struct{ gpu, cluster int64 }

// historyBytes is the space the history tables take with their indexes,
// after the space of deleted rows is given back. PostgreSQL: VACUUM FULL,
// then pg_total_relation_size per table. SQLite (built without dbstat):
// VACUUM, then the file's pages, the same figure in both fields; the
// caller takes differences between steps.
func historyBytes(b *testing.B, s *Store) tableBytes {
	var out tableBytes
	if s.db.Dialector.Name() == "postgres" {
		for _, q := range []string{"VACUUM FULL gpu_history", "VACUUM FULL cluster_history"} {
			if err := s.db.Exec(q).Error; err != nil {
				b.Fatal(err)
			}
		}
		err := s.db.Raw("SELECT pg_total_relation_size('gpu_history'), pg_total_relation_size('cluster_history')").Row().Scan(&out.gpu, &out.cluster)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	if err := s.db.Exec("VACUUM").Error; err != nil {
		b.Fatal(err)
	}
	var pages, size int64
	if err := s.db.Raw("PRAGMA page_count").Row().Scan(&pages); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Raw("PRAGMA page_size").Row().Scan(&size); err != nil {
		b.Fatal(err)
	}
	out.gpu, out.cluster = pages*size, pages*size
	return out
}
