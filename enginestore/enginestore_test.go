package enginestore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

func openStore(t *testing.T, dsn string) Store {
	t.Helper()
	s, err := models.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", models.RedactDSN(dsn), err)
	}
	t.Cleanup(func() { s.Close() })
	return New(s)
}

// TestDeclaredProfileReachesTheEngine: a declared profile is kept in the
// jobs table and handed to the engine with the job; a job without one
// has none.
func TestDeclaredProfileReachesTheEngine(t *testing.T) {
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openStore(t, dsn)
		ctx := context.Background()
		if _, err := s.CreateTeam(ctx, "vision", 2); err != nil {
			t.Fatal(err)
		}
		want := &synergy.Profile{Family: "custom", CPU: synergy.Curve{{X: 1, Speed: 0.4}, {X: 4, Speed: 1}}, Mem: synergy.Curve{{X: 0, Speed: 0.8}, {X: 32, Speed: 1}}}
		declared := &models.Job{Name: "declared", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Now()}
		if err := declared.SetDeclaredProfile(want); err != nil {
			t.Fatal(err)
		}
		plain := &models.Job{Name: "plain", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Now()}
		for _, j := range []*models.Job{declared, plain} {
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		js, err := s.UnfinishedEngineJobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]*synergy.Profile{}
		for _, j := range js {
			got[j.ID] = j.CPUProfile
		}
		if !reflect.DeepEqual(got[declared.ID], want) {
			t.Errorf("declared job's profile %+v, want %+v", got[declared.ID], want)
		}
		if got[plain.ID] != nil {
			t.Errorf("plain job's profile %+v, want none", got[plain.ID])
		}
	})
}
