package models_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestRunningPlacements: only running jobs, each with where it runs now;
// a queued job and a finished one (which keeps where it ran) are absent.
func TestRunningPlacements(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		var ids []int64
		for range 3 {
			j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 2, SimDuration: 1, SubmittedAt: t0}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		if _, err := s.MarkStarted(ctx, ids[0], []string{"n:0", "n:1"}, t0); err != nil {
			t.Fatal(err)
		}
		run, err := s.MarkStarted(ctx, ids[1], []string{"n:2", "n:3"}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MarkStopped(ctx, job.RunRef{Job: ids[1], Run: run}, models.JobSucceeded, nil, "", usage.Service{}, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err := s.RunningPlacements(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[int64][]string{ids[0]: {"n:0", "n:1"}}; !reflect.DeepEqual(got, want) {
			t.Errorf("running placements = %v, want %v", got, want)
		}
	})
}
