package models_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestSetHeld: a running job attains service by the GPUs it holds as they
// change (a shared GPU by its share), the page's figure while it runs and
// the stored one when it stops agree, and a change for an ended run is
// ignored.
func TestSetHeld(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openStore(t, dsn)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		at := func(sec int) time.Time { return now.Add(time.Duration(sec) * time.Second) }
		if _, err := s.CreateTeam(ctx, "vision", 2); err != nil {
			t.Fatal(err)
		}
		j := &models.Job{Name: "shared", Team: "vision", User: "alice", GPUs: 1, SimDuration: 600, SubmittedAt: now, Sharing: true}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkStarted(ctx, j.ID, []string{"n:0"}, now); err != nil {
			t.Fatal(err)
		}
		ref := job.RunRef{Job: j.ID, Run: 1}
		// Half the GPU from the start, the whole of it from t+60.
		for _, h := range []models.Held{{Ref: ref, GPUs: 0.5, At: at(0)}, {Ref: ref, GPUs: 1, At: at(60)}} {
			if err := s.SetHeld(ctx, []models.Held{h}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if sv := got.Service(at(90)); math.Abs(sv.GPUSeconds-60) > 1e-9 || sv.ExecutedS != 90 {
			t.Fatalf("at t+90: %+v, want 90 s run and 30 + 30 GPU-seconds", sv)
		}
		if err := s.MarkStopped(ctx, ref, models.JobSucceeded, nil, "", usage.Service{}, at(120)); err != nil {
			t.Fatal(err)
		}
		if err := s.SetHeld(ctx, []models.Held{{Ref: ref, GPUs: 0.25, At: at(130)}}); err != nil {
			t.Fatal(err)
		}
		got, err = s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.AttainedService-90) > 1e-9 || got.ExecutedS != 120 || got.HeldGPUs != 0 || got.RunGPUSeconds != 0 {
			t.Fatalf("stopped: attained %v, executed %v, held %v, run GPU-s %v; want 90, 120 and the run's accrual cleared",
				got.AttainedService, got.ExecutedS, got.HeldGPUs, got.RunGPUSeconds)
		}
	})
}
