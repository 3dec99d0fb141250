package models_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// TestBatchPolicy: a team's batch priorities are stored and read back
// (the default when none is set), and HighPriorityGPUs counts the GPUs of
// the team's unfinished high-priority jobs only.
func TestBatchPolicy(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		tm, err := s.Team(ctx, "vision")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(tm.Priorities(), ","); got != "normal,low" {
			t.Fatalf("default priorities %q, want normal,low", got)
		}
		if err := s.SetTeamBatchPolicy(ctx, "vision", models.BatchPolicy{Priorities: []string{"high", "low"}, HighPriorityGPUs: 6}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetTeamBatchPolicy(ctx, "vision", models.BatchPolicy{Priorities: []string{"urgent"}}); err == nil {
			t.Fatal("an unknown priority was stored")
		}
		if err := s.SetTeamBatchPolicy(ctx, "nosuch", models.BatchPolicy{Priorities: []string{"low"}}); err == nil {
			t.Fatal("a team that does not exist was given a policy")
		}
		if tm, err = s.Team(ctx, "vision"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(tm.Priorities(), ","); got != "high,low" || tm.HighPriorityGPUs != 6 {
			t.Fatalf("stored %q, %d GPUs; want high,low and 6", got, tm.HighPriorityGPUs)
		}
		at := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
		for _, j := range []*models.Job{
			{Name: "a", Team: "vision", User: "alice", GPUs: 2, Priority: job.PriorityHigh, SubmittedAt: at},
			{Name: "b", Team: "vision", User: "alice", GPUs: 3, Priority: job.PriorityHigh, SubmittedAt: at},
			{Name: "c", Team: "vision", User: "alice", GPUs: 8, SubmittedAt: at},
			{Name: "d", Team: "vision", User: "alice", GPUs: 8, Priority: job.PriorityLow, SubmittedAt: at},
			{Name: "e", Team: "nlp", User: "bob", GPUs: 5, Priority: job.PriorityHigh, SubmittedAt: at},
		} {
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			if j.Name == "b" {
				if _, err := s.MarkStarted(ctx, j.ID, []string{"node-0:0", "node-0:1", "node-0:2"}, at); err != nil {
					t.Fatal(err)
				}
			}
			if j.Name == "a" {
				if err := s.Cancel(ctx, j.ID, "done with it", at); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n, err := s.HighPriorityGPUs(ctx, "vision"); err != nil || n != 3 {
			t.Fatalf("vision's high-priority GPUs: %d, %v; want 3 (the running job; the cancelled one ended)", n, err)
		}
	})
}
