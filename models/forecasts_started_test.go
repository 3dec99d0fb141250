package models

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestForecastsStartedFollowsRuns: forecasts.started, kept by the
// database (migration 46), is what ForecastOutcomes asked the runs
// before: a forecast other than the latest whose job has a run. Jobs get
// forecasts of every kind and start, stop and start again at random,
// forecasts coming before and after their job's runs; the column is
// checked against the runs after every step, on SQLite and PostgreSQL.
func TestForecastsStartedFollowsRuns(t *testing.T) {
	t.Parallel()
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, err := OpenWith(ctx, dsn, Options{PasswordCost: bcrypt.MinCost})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		check := func(step int) {
			t.Helper()
			var got, want []int64
			if err := s.db.Raw("SELECT id FROM forecasts WHERE started ORDER BY id").Scan(&got).Error; err != nil {
				t.Fatal(err)
			}
			if err := s.db.Raw("SELECT id FROM forecasts WHERE kind <> 'latest' AND job_id IN (SELECT job_id FROM runs) ORDER BY id").Scan(&want).Error; err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: started forecasts %v, want those of jobs that ran %v", step, got, want)
			}
		}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var jobs []*Job
		running := map[int64]int64{}
		rnd := rand.New(rand.NewPCG(46, 1))
		kinds := []string{"first", "1m", "5m", "15m", "1h"}
		for step := range 120 {
			now = now.Add(time.Second)
			switch r := rnd.IntN(10); {
			case r < 2 || len(jobs) == 0:
				j := &Job{Name: fmt.Sprintf("j%d", step), Team: "vision", User: "alice", GPUs: 1, SubmittedAt: now}
				if err := s.CreateJob(ctx, j); err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, j)
			case r < 6:
				j := jobs[rnd.IntN(len(jobs))]
				f := Forecast{JobID: j.ID, Kind: kinds[rnd.IntN(len(kinds))], MadeAt: now, State: "expected"}
				if rnd.IntN(3) == 0 {
					if err := s.SetLatestForecasts(ctx, []Forecast{f}); err != nil {
						t.Fatal(err)
					}
				} else if err := s.AddForecasts(ctx, []Forecast{f}); err != nil {
					t.Fatal(err)
				}
			default:
				j := jobs[rnd.IntN(len(jobs))]
				if run, ok := running[j.ID]; ok {
					if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run}, JobPreempted, nil, "preempted", usage.Service{}, now); err != nil {
						t.Fatal(err)
					}
					delete(running, j.ID)
					break
				}
				run, err := s.MarkStarted(ctx, j.ID, []string{"n:0"}, now)
				if err != nil {
					t.Fatal(err)
				}
				running[j.ID] = run
			}
			check(step)
		}
		var started int
		if err := s.db.Raw("SELECT COUNT(*) FROM forecasts WHERE started").Scan(&started).Error; err != nil || started == 0 {
			t.Fatalf("%d started forecasts, %v: the steps never made one", started, err)
		}
	})
}
