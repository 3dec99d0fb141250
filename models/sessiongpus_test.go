package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestTeamCapFigures: what a team's caps count, on both databases: its
// unfinished sessions' GPUs (not those asked to end, not batch jobs,
// not another team's, not ended ones) and its high-priority jobs'.
func TestTeamCapFigures(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]func(testing.TB) string{"sqlite": modelstest.SQLiteDSN, "postgres": modelstest.PostgresDSN} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openStore(t, dsn(t))
			now := time.Now()
			add := func(team string, gpus int, session, priority string) *models.Job {
				t.Helper()
				j := &models.Job{Name: "j", Team: team, User: "alice", GPUs: gpus, SimDuration: 60, SubmittedAt: now,
					SessionType: session, Priority: priority}
				if err := s.CreateJob(ctx, j); err != nil {
					t.Fatal(err)
				}
				return j
			}
			add("vision", 2, "jupyter", "") // counts
			add("vision", 4, "", "")        // a batch job
			add("nlp", 8, "terminal", "")   // another team's
			running := add("vision", 1, "terminal", "")
			if _, err := s.MarkStarted(ctx, running.ID, []string{"n:0"}, now); err != nil {
				t.Fatal(err)
			}
			stopping := add("vision", 16, "terminal", "")
			run2, err := s.MarkStarted(ctx, stopping.ID, []string{"n:1"}, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.MarkStopping(ctx, stopping.ID, job.StopRequest{Run: run2, To: job.Cancelled, Reason: "cancelled by alice", At: now}); err != nil {
				t.Fatal(err)
			}
			preempting := add("vision", 32, "terminal", "") // asked to stop back to the queue: still asks
			run3, err := s.MarkStarted(ctx, preempting.ID, []string{"n:2"}, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.MarkStopping(ctx, preempting.ID, job.StopRequest{Run: run3, To: job.Preempted, Reason: "reclaimed", At: now}); err != nil {
				t.Fatal(err)
			}
			asked := add("vision", 64, "web", "")
			if err := s.RequestCancel(ctx, asked.ID, "cancelled by alice", now); err != nil {
				t.Fatal(err)
			}
			ended := add("vision", 128, "jupyter", "")
			if err := s.Cancel(ctx, ended.ID, "cancelled by alice", now); err != nil {
				t.Fatal(err)
			}
			add("vision", 3, "", job.PriorityHigh)
			add("nlp", 5, "", job.PriorityHigh)

			if got, err := s.SessionGPUs(ctx, "vision"); err != nil || got != 2+1+32 {
				t.Errorf("vision's session GPUs: %d, %v; want 35", got, err)
			}
			if got, err := s.HighPriorityGPUs(ctx, "vision"); err != nil || got != 3 {
				t.Errorf("vision's high-priority GPUs: %d, %v; want 3", got, err)
			}
		})
	}
}
