package models_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// TestCreateWithinHoldsAcrossReplicas: two replicas over one PostgreSQL
// database store sessions against a team's cap of 3 GPUs, eight at once
// each: three are taken, the rest refused with the figures, and a
// high-priority array counts all its tasks. (On SQLite the portal is one
// process, which submits capped jobs one at a time: app.Submit.)
func TestCreateWithinHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := modelstest.PostgresDSN(t)
	a, b := openStore(t, dsn), openStore(t, dsn)
	if _, err := a.CreateTeam(ctx, "vision", 4); err != nil {
		t.Fatal(err)
	}
	if err := a.SetTeamSessionPolicy(ctx, "vision", models.SessionPolicy{MaxSessionGPUs: 3}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetTeamBatchPolicy(ctx, "vision", models.BatchPolicy{Priorities: []string{job.PriorityHigh, job.PriorityNormal}, HighPriorityGPUs: 4}); err != nil {
		t.Fatal(err)
	}
	c := models.TeamCap{Team: "vision", Sessions: true}
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for i := range 16 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			j := &models.Job{Name: "s", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(), SessionType: "terminal"}
			errs <- s.CreateJobWithin(ctx, j, c)
		})
	}
	wg.Wait()
	close(errs)
	taken := 0
	for err := range errs {
		var over *models.OverCapError
		switch {
		case err == nil:
			taken++
		case errors.As(err, &over):
			if over.Held != 3 || over.Ask != 1 || over.Cap != c || over.GPUs != 3 {
				t.Errorf("refused with %+v, want 3 held of 3, 1 asked", over)
			}
		default:
			t.Errorf("a submission failed: %v", err)
		}
	}
	if got, err := a.SessionGPUs(ctx, "vision"); taken != 3 || err != nil || got != 3 {
		t.Errorf("%d of 16 taken, the team's sessions ask for %d (%v); want 3 of a cap of 3", taken, got, err)
	}

	high := models.TeamCap{Team: "vision"}
	array := func() []*models.Job {
		var tasks []*models.Job
		for i := range 3 {
			tasks = append(tasks, &models.Job{Name: fmt.Sprintf("h[%d]", i), Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(),
				Priority: job.PriorityHigh, ArrayIndex: i, SimDuration: 60})
		}
		return tasks
	}
	if err := b.CreateArrayWithin(ctx, array(), high); err != nil {
		t.Fatalf("an array of 3 within a cap of 4: %v", err)
	}
	var over *models.OverCapError
	if err := a.CreateArrayWithin(ctx, array(), high); !errors.As(err, &over) || over.Held != 3 || over.Ask != 3 {
		t.Errorf("a second array of 3: %v, want refused with 3 held, 3 asked", err)
	}
	if got, err := a.HighPriorityGPUs(ctx, "vision"); err != nil || got != 3 {
		t.Errorf("high-priority GPUs %d (%v), want 3: the refused array left no task", got, err)
	}
}

// TestCreateWithinReadsThePolicyNow: a capped submission is held to the
// team's policy as stored when it is stored, not as its validation read
// it: a cap lowered meanwhile refuses it with the new figure, sessions
// turned off meanwhile refuse it, a team without a cap takes it, and an
// unknown team is not found. On both databases.
func TestCreateWithinReadsThePolicyNow(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		sessions := models.TeamCap{Team: "vision", Sessions: true}
		session := func() error {
			j := &models.Job{Name: "s", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(), SessionType: "terminal"}
			return s.CreateJobWithin(ctx, j, sessions)
		}
		policy := func(p models.SessionPolicy) {
			t.Helper()
			if err := s.SetTeamSessionPolicy(ctx, "vision", p); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 { // no cap
			if err := session(); err != nil {
				t.Fatalf("session %d without a cap: %v", i+1, err)
			}
		}
		policy(models.SessionPolicy{MaxSessionGPUs: 3})
		if err := session(); err != nil {
			t.Fatalf("a third session within a cap of 3: %v", err)
		}
		policy(models.SessionPolicy{MaxSessionGPUs: 2})
		var over *models.OverCapError
		if err := session(); !errors.As(err, &over) || over.GPUs != 2 || over.Held != 3 || over.Ask != 1 {
			t.Errorf("a session past a cap lowered to 2: %v, want refused with 3 held of 2", err)
		}
		policy(models.SessionPolicy{SessionsOff: true})
		if err := session(); !errors.Is(err, models.ErrSessionsOff) {
			t.Errorf("a session once sessions are off: %v, want ErrSessionsOff", err)
		}
		high := &models.Job{Name: "h", Team: "vision", User: "alice", GPUs: 8, SubmittedAt: time.Now(), Priority: job.PriorityHigh, SimDuration: 60}
		if err := s.CreateJobWithin(ctx, high, models.TeamCap{Team: "vision"}); err != nil {
			t.Errorf("a high-priority job of a team without a cap on them (sessions off): %v", err)
		}
		if got, err := s.SessionGPUs(ctx, "vision"); err != nil || got != 3 {
			t.Errorf("the team's sessions ask for %d (%v), want 3: the refused ones left nothing", got, err)
		}
		ghost := &models.Job{Name: "s", Team: "ghost", User: "alice", GPUs: 1, SubmittedAt: time.Now(), SessionType: "terminal"}
		if err := s.CreateJobWithin(ctx, ghost, models.TeamCap{Team: "ghost", Sessions: true}); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a session of an unknown team: %v, want ErrNotFound", err)
		}
	})
}
