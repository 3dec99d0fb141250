package models

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// An array's tasks share their first task's ID; a job's variables,
// folder, limit, retries and dependencies are kept; a waiting job ends in
// the final state asked; teams keep their time limits. On both databases.
func TestJobSpecStore(t *testing.T) {
	t.Parallel()
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openTestStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 2); err != nil {
			t.Fatal(err)
		}
		now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
		var tasks []*Job
		for i := range 3 {
			tasks = append(tasks, &Job{Name: "sweep", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: now,
				ArrayIndex: i * 2, ArrayLimit: 2, Env: Strings{"LR=0.1"}, Workdir: "/d", TimeLimitS: 3600, Retries: 2,
				Dependencies: Strings{"afterok:7"}})
		}
		if err := s.CreateArray(ctx, tasks); err != nil {
			t.Fatal(err)
		}
		got, err := s.ArrayTasks(ctx, tasks[0].ID)
		if err != nil || len(got) != 3 {
			t.Fatalf("tasks %v, %v", got, err)
		}
		for i, j := range got {
			if j.ArrayID != tasks[0].ID || j.ArrayIndex != i*2 || j.State != JobQueued || j.Env[0] != "LR=0.1" || j.Workdir != "/d" ||
				j.TimeLimit() != time.Hour || j.Retries != 2 || len(j.Deps()) != 1 || j.Deps()[0] != (job.Dependency{Kind: job.AfterOK, JobID: 7}) {
				t.Errorf("task %d: %+v", i, j)
			}
		}
		if err := s.EndWaiting(ctx, got[1].ID, JobTimedOut, "time limit reached", now); err != nil {
			t.Fatal(err)
		}
		if err := s.EndWaiting(ctx, got[1].ID, JobCancelled, "again", now); !errors.Is(err, ErrConflict) {
			t.Errorf("ending an ended job: %v; want a conflict", err)
		}
		// The array's ID stands for the whole array: unfinished while a
		// task is, then the first task's that did not succeed.
		states, err := s.JobStates(ctx, []int64{got[0].ID, got[1].ID, 999999})
		if err != nil || states[got[0].ID] != JobQueued || states[got[1].ID] != JobTimedOut || len(states) != 2 {
			t.Errorf("states %v, %v", states, err)
		}
		for _, j := range []Job{got[0], got[2]} {
			if err := s.EndWaiting(ctx, j.ID, JobCancelled, "test", now); err != nil {
				t.Fatal(err)
			}
		}
		if states, err := s.JobStates(ctx, []int64{got[0].ID}); err != nil || states[got[0].ID] != JobCancelled {
			t.Errorf("the ended array: %v, %v; want its first task by index that did not succeed (cancelled)", states, err)
		}
		if err := s.SetTeamTimeLimits(ctx, "vision", 3600, 7200); err != nil {
			t.Fatal(err)
		}
		if err := s.SetTeamTimeLimits(ctx, "vision", 7200, 3600); err == nil {
			t.Error("a default above the maximum was kept")
		}
		if err := s.SetTeamTimeLimits(ctx, "nosuch", 0, 0); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown team: %v", err)
		}
		team, err := s.Team(ctx, "vision")
		if err != nil || team.DefaultTimeLimitS != 3600 || team.MaxTimeLimitS != 7200 {
			t.Errorf("team %+v, %v", team, err)
		}
	})
}
