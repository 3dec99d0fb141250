package models

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models/modelstest"
)

// BenchmarkJobCounts counts 30,000 jobs by team and state (10,000
// waiting, 20,000 ended) as /metrics did, by a count of the table
// ("scan"), and as it does now, from the counts the database keeps
// ("kept", jobcounts.go).
//
//	go test -run '^$' -bench JobCounts -benchtime 20x ./models
func BenchmarkJobCounts(b *testing.B) {
	for _, db := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", modelstest.SQLiteDSN}, {"postgres", modelstest.PostgresDSN}} {
		b.Run(db.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, db.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			at := time.Now().Add(-time.Hour)
			js := make([]Job, 30_000)
			for i := range js {
				js[i] = Job{Name: fmt.Sprintf("j%d", i), Team: []string{"vision", "nlp", "speech", "rl"}[i%4], User: "alice", GPUs: 1,
					SimDuration: 10, State: JobSucceeded, SubmittedAt: at}
				if i >= 20_000 {
					js[i].State = JobQueued
				}
			}
			if err := s.db.CreateInBatches(js, s.rowsPerInsert()).Error; err != nil {
				b.Fatal(err)
			}
			if _, err := s.JobCounts(ctx); err != nil { // folds the 30,000 rows the inserts added
				b.Fatal(err)
			}
			b.Run("scan", func(b *testing.B) {
				for range b.N {
					var rows []JobCount
					if err := s.db.Raw("SELECT team, state, COUNT(*) AS n FROM jobs GROUP BY team, state").Scan(&rows).Error; err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("kept", func(b *testing.B) {
				for range b.N {
					if _, err := s.JobCounts(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
