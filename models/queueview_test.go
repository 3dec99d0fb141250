package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestQueueRowsFollowChanges changes jobs step by step through the store
// and checks after each step that the rows and counts it keeps between
// reads (queueview.go) are those a whole read gives: a second store on
// the same database, whose first read is whole.
func TestQueueRowsFollowChanges(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateUser(ctx, "bob", "secret-password", models.RoleResearcher, "nlp"); err != nil {
			t.Fatal(err)
		}
		submit := func(user, team string) func() error {
			return func() error {
				return s.CreateJob(ctx, &models.Job{Name: "j", Team: team, User: user, GPUs: 1, SimDuration: 10, SubmittedAt: t0})
			}
		}
		zero := 0
		steps := []struct {
			name   string
			do     func() error
			unfin  int
			queued int
		}{
			{"nothing yet", func() error { return nil }, 0, 0},
			{"alice submits", submit("alice", "vision"), 1, 1},
			{"bob submits", submit("bob", "nlp"), 2, 2},
			{"alice submits again", submit("alice", "vision"), 3, 3},
			{"job 1 starts", func() error { _, err := s.MarkStarted(ctx, 1, []string{"m:0"}, t0.Add(time.Second)); return err }, 3, 2},
			{"job 3 moves to queue 1", func() error {
				return s.SetQueueStates(ctx, map[int64]models.QueueState{3: {Index: 1, Since: 5}})
			}, 3, 2},
			{"bob is disabled: his job is held", func() error { _, err := s.DisableUser(ctx, "bob", "admin", t0); return err }, 3, 2},
			{"bob is enabled", func() error { _, err := s.EnableUser(ctx, "bob", t0); return err }, 3, 2},
			{"job 3 is cancelled", func() error { return s.Cancel(ctx, 3, "cancelled by alice", t0) }, 2, 1},
			{"job 1 ends", func() error {
				return s.MarkStopped(ctx, job.RunRef{Job: 1, Run: 1}, models.JobSucceeded, &zero, "", usage.Service{}, t0.Add(time.Minute))
			}, 1, 1},
		}
		for _, st := range steps {
			if err := st.do(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			got, err := s.QueueRows(ctx)
			if err != nil {
				t.Fatal(err)
			}
			whole := openStore(t, dsn)
			want, err := whole.QueueRows(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != st.unfin || len(got) != len(want) {
				t.Fatalf("%s: %d rows kept, %d read whole; want %d", st.name, len(got), len(want), st.unfin)
			}
			for i := range got {
				g, w := got[i], want[i]
				if !g.SubmittedAt.Equal(w.SubmittedAt) {
					t.Errorf("%s: job %d submitted at %v, read whole %v", st.name, g.ID, g.SubmittedAt, w.SubmittedAt)
				}
				g.SubmittedAt, w.SubmittedAt = time.Time{}, time.Time{}
				if g != w {
					t.Errorf("%s: row kept %+v, read whole %+v", st.name, g, w)
				}
			}
			counts, err := s.QueueCounts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantCounts, err := whole.QueueCounts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			queued := 0
			for _, c := range counts {
				if c.State == models.JobQueued {
					queued += c.N
				}
			}
			if queued != st.queued || len(counts) != len(wantCounts) {
				t.Errorf("%s: counts %+v (read whole %+v), want %d queued", st.name, counts, wantCounts, st.queued)
			}
			for i := range counts {
				if i < len(wantCounts) && counts[i] != wantCounts[i] {
					t.Errorf("%s: count %+v, read whole %+v", st.name, counts[i], wantCounts[i])
				}
			}
		}
	})
}
