package models_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/models"
)

func TestSetMeasuredMemory(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openStore(t, dsn)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		if _, err := s.CreateTeam(ctx, "vision", 2); err != nil {
			t.Fatal(err)
		}
		j := &models.Job{Name: "shared", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: now,
			Sharing: true, MemPersistentMiB: 1000, MemEphemeralMiB: 4000, MemSource: "declared", BatchSize: 32}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkStarted(ctx, j.ID, []string{"n:0"}, now); err != nil {
			t.Fatal(err)
		}
		est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 2600, Source: memest.Measured}
		if err := s.SetMeasuredMemory(ctx, j.ID, est); err != nil {
			t.Fatal(err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.MemoryEstimate() != est || got.State != models.JobRunning || !got.Sharing || got.BatchSize != 32 {
			t.Fatalf("job %+v: want the measured estimate and nothing else changed", got)
		}
		if err := s.SetMeasuredMemory(ctx, j.ID+100, est); !errors.Is(err, models.ErrNotFound) {
			t.Fatalf("unknown job: %v, want ErrNotFound", err)
		}
	})
}
