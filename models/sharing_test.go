package models_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

func TestMarkRequeuedKeepsTheLargerEstimate(t *testing.T) {
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openStore(t, dsn)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		if _, err := s.CreateTeam(ctx, "vision", 2); err != nil {
			t.Fatal(err)
		}
		j := &models.Job{Name: "shared", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: now,
			Sharing: true, GPUFraction: 0.5, MemPersistentMiB: 1000, MemEphemeralMiB: 4000, MemSource: "declared", BatchSize: 32}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkStarted(ctx, j.ID, []string{"n:0"}, now); err != nil {
			t.Fatal(err)
		}
		est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 9000, Source: memest.Measured}
		reason := "outgrew its lane: requeued with E=9000 MiB, P=1000 MiB (on n)"
		if err := s.MarkRequeued(ctx, job.RunRef{Job: j.ID, Run: 1}, est, reason, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != models.JobQueued || got.Failures != 0 || got.RetryAt != nil || got.ExitCode != nil || len(got.Placement) != 0 {
			t.Fatalf("job %+v: want queued, no failure, no backoff", got)
		}
		if got.MemoryEstimate() != est || !got.Sharing || got.GPUFraction != 0.5 || got.BatchSize != 32 || got.ExecutedS != 60 {
			t.Fatalf("job %+v: want the new estimate, its sharing fields kept and a minute executed", got)
		}
		es, err := s.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if last := es[len(es)-1]; last.State != models.JobQueued || !strings.HasPrefix(last.Detail, "outgrew its lane") {
			t.Fatalf("history ends with %+v", last)
		}
		if err := s.MarkRequeued(ctx, job.RunRef{Job: j.ID, Run: 1}, est, reason, now); err == nil {
			t.Fatal("requeued a job that is not running")
		}
	})
}
