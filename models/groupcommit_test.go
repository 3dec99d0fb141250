package models_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// Concurrent submissions share commits, and each returns with its own
// job stored under its own ID, with its history, on both databases and
// with a pool of one connection or several.
func TestCreateJobGroupCommit(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		for _, conns := range []int{1, 4} {
			t.Run(fmt.Sprintf("conns=%d", conns), func(t *testing.T) {
				ctx := context.Background()
				s, err := models.OpenWith(ctx, dsn, models.Options{MaxConns: conns})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				const workers, each = 8, 25
				ids := make([][]int64, workers)
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						for i := range each {
							j := &models.Job{Name: fmt.Sprintf("w%d-%d", w, i), Team: "vision", User: "alice", GPUs: 1, SimDuration: 10, SubmittedAt: time.Unix(1000, 0)}
							if err := s.CreateJob(ctx, j); err != nil {
								t.Error(err)
								return
							}
							ids[w] = append(ids[w], j.ID)
						}
					})
				}
				wg.Wait()
				seen := make(map[int64]bool)
				for w := range workers {
					for i, id := range ids[w] {
						if seen[id] {
							t.Fatalf("ID %d given twice", id)
						}
						seen[id] = true
						j, err := s.Job(ctx, id)
						if err != nil || j.Name != fmt.Sprintf("w%d-%d", w, i) || j.State != models.JobQueued {
							t.Fatalf("job %d = %+v, %v", id, j, err)
						}
						if es, err := s.JobEvents(ctx, id); err != nil || len(es) != 1 {
							t.Fatalf("job %d events %+v, %v", id, es, err)
						}
					}
				}
				if len(seen) != workers*each {
					t.Fatalf("%d jobs stored, want %d", len(seen), workers*each)
				}
			})
		}
	})
}

// BenchmarkCreateJob measures submissions per second into the store at
// concurrency 1 and 8, over a queue of 10,000 jobs already waiting.
//
//	go test -run '^$' -bench CreateJob -benchtime 2000x ./models
func BenchmarkCreateJob(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, conc := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/conc=%d", db, conc), func(b *testing.B) {
				dsn := modelstest.SQLiteDSN(b)
				if db == "postgres" {
					dsn = modelstest.PostgresDSN(b)
				}
				ctx := context.Background()
				s, err := models.Open(ctx, dsn)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				queue := make([]*models.Job, 10_000)
				for i := range queue {
					queue[i] = &models.Job{Name: "q", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Unix(1000, 0)}
				}
				if err := s.CreateJobs(ctx, queue); err != nil {
					b.Fatal(err)
				}
				next := make(chan int, b.N)
				for i := range b.N {
					next <- i
				}
				close(next)
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for range conc {
					wg.Go(func() {
						for range next {
							j := &models.Job{Name: "b", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Unix(2000, 0)}
							if err := s.CreateJob(ctx, j); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
			})
		}
	}
}

// TestNewJobsStampedAtCommit: the jobs of one transaction carry one
// updated_at, taken as it ends (stampNewJobs: CreateJobs, here, and a
// shared commit of CreateJob calls), so a reader of the rows changed since a moment just before
// the commit's end sees every one of them, however long the batch took to
// write (the engine's view re-reads 5 s back: a slow batch's first rows
// went unseen for 5 minutes).
func TestNewJobsStampedAtCommit(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, err := models.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check := func(what string, js []*models.Job) {
			t.Helper()
			stamp := js[0].UpdatedAt
			changed, err := s.JobsChangedSince(ctx, stamp.Add(-time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			seen := make(map[int64]bool)
			for _, j := range changed {
				seen[j.ID] = true
			}
			for _, j := range js {
				if !j.UpdatedAt.Equal(stamp) || !seen[j.ID] {
					t.Errorf("%s: job %d stamped %v, seen %v; want one stamp %v for all, each seen", what, j.ID, j.UpdatedAt, seen[j.ID], stamp)
				}
			}
		}
		batch := make([]*models.Job, 600) // more than one stamping statement
		for i := range batch {
			batch[i] = &models.Job{Name: fmt.Sprint("b", i), Team: "vision", User: "alice", GPUs: 1, SimDuration: 10, SubmittedAt: time.Unix(1000, 0)}
		}
		if err := s.CreateJobs(ctx, batch); err != nil {
			t.Fatal(err)
		}
		check("CreateJobs", batch)
	})
}
