package models_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestJCTsFollowChanges ends jobs step by step and asks for the JCT
// window after each, a window that moves on as the clock does, and
// checks the completions the store keeps between reads (jctview.go)
// against those a second store reads whole: jobs ending in the window
// come in, those that left it go, a job that waits or runs is never
// counted, and a longer window is read whole and kept.
func TestJCTsFollowChanges(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		now := t0
		var ids []int64
		submit := func(n int) {
			for range n {
				j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 10, SubmittedAt: now}
				if err := s.CreateJob(ctx, j); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
		}
		end := func(id int64, to models.JobState) {
			run, err := s.MarkStarted(ctx, id, []string{"m:0"}, now)
			if err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Duration(id) * time.Minute)
			code := 0
			if err := s.MarkStopped(ctx, job.RunRef{Job: id, Run: run}, to, &code, "", usage.Service{}, now); err != nil {
				t.Fatal(err)
			}
		}
		check := func(step string, window time.Duration) {
			t.Helper()
			since := now.Add(-window)
			got, err := s.JCTsSince(ctx, since, 100000)
			if err != nil {
				t.Fatal(err)
			}
			want, err := openStore(t, dsn).JCTsSince(ctx, since, 100000)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s, window %s: kept %v, read whole %v", step, window, got, want)
			}
		}
		submit(12)
		check("nothing ended", time.Hour)
		for k, id := range ids[:8] {
			end(id, []models.JobState{models.JobSucceeded, models.JobFailed}[k%2])
			check(fmt.Sprintf("job %d ended", id), time.Hour)
		}
		if err := s.Cancel(ctx, ids[8], "cancelled", now); err != nil {
			t.Fatal(err)
		}
		check("a cancelled job", time.Hour)
		check("a longer window", 24*time.Hour)
		now = now.Add(50 * time.Minute)
		check("the window moved on", time.Hour)
		end(ids[9], models.JobSucceeded)
		check("another ended", time.Hour)
		if got, _ := s.JCTsSince(ctx, now.Add(-24*time.Hour), 3); len(got) != 3 {
			t.Errorf("at most 3: got %d", len(got))
		}
	})
}
