package models

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
)

// TestJobCountsEqualScan changes jobs at random through the store (submit
// one or an array, start, end, fail, retry, cancel, time out), and beside
// it as another writer would (a team renamed, a job deleted, by SQL), and
// checks after every few changes that the counts the database keeps
// (jobcounts.go) equal a count of the whole table; folded into few rows
// often (a low threshold), and again after the store is closed and opened
// (a restart).
func TestJobCountsEqualScan(t *testing.T) {
	t.Parallel()
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		open := func() *Store {
			s, err := OpenWith(ctx, dsn, Options{PasswordCost: bcrypt.MinCost})
			if err != nil {
				t.Fatal(err)
			}
			s.jobCountsCompactAt = 7
			return s
		}
		s := open()
		check := func(when string) {
			t.Helper()
			got, err := s.JobCounts(ctx)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			var want []JobCount
			if err := s.db.Raw("SELECT team, state, COUNT(*) AS n FROM jobs GROUP BY team, state ORDER BY team, state").Scan(&want).Error; err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: kept counts %v, the table's %v", when, got, want)
			}
		}
		check("no jobs")
		rnd := rand.New(rand.NewPCG(33, 1))
		teams := []string{"vision", "nlp", "speech"}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		runs := map[int64]int64{} // running job -> its run
		var ids []int64
		submit := func() {
			team := teams[rnd.IntN(len(teams))]
			if rnd.IntN(5) == 0 {
				tasks := make([]*Job, 1+rnd.IntN(4))
				for i := range tasks {
					tasks[i] = &Job{Name: "a", Team: team, User: "alice", GPUs: 1, SimDuration: 10, SubmittedAt: now}
				}
				if err := s.CreateArray(ctx, tasks); err != nil {
					t.Fatal(err)
				}
				for _, j := range tasks {
					ids = append(ids, j.ID)
				}
				return
			}
			j := &Job{Name: "j", Team: team, User: "alice", GPUs: 1, SimDuration: 10, SubmittedAt: now}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		change := func() {
			if len(ids) == 0 || rnd.IntN(4) == 0 {
				submit()
				return
			}
			id := ids[rnd.IntN(len(ids))]
			j, err := s.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Second)
			code := 1
			switch {
			case j.State == JobQueued && rnd.IntN(5) == 0:
				err = s.Cancel(ctx, id, "cancelled", now)
			case j.State == JobQueued && rnd.IntN(5) == 0:
				err = s.EndWaiting(ctx, id, JobTimedOut, "time limit", now)
			case j.State == JobQueued:
				runs[id], err = s.MarkStarted(ctx, id, []string{"m:0"}, now)
			case j.State == JobRunning && rnd.IntN(3) == 0:
				err = s.MarkRetry(ctx, job.RunRef{Job: id, Run: runs[id]}, 1, "exited 1", now, now)
			case j.State == JobRunning:
				to := []JobState{JobSucceeded, JobFailed}[rnd.IntN(2)]
				err = s.MarkStopped(ctx, job.RunRef{Job: id, Run: runs[id]}, to, &code, "", usage.Service{}, now)
			case rnd.IntN(3) == 0:
				// Another writer: a finished job moves to another team.
				err = s.db.Exec("UPDATE jobs SET team = ? WHERE id = ?", teams[rnd.IntN(len(teams))], id).Error
			default:
				err = s.db.Exec("DELETE FROM jobs WHERE id = ?", id).Error
				ids = slices.DeleteFunc(ids, func(x int64) bool { return x == id })
			}
			if err != nil {
				t.Fatalf("job %d in state %s: %v", id, j.State, err)
			}
		}
		for i := range 300 {
			change()
			if i%5 == 4 {
				check("after change " + strconv.Itoa(i+1))
			}
		}
		// An update that sets the state to what it was changes no count.
		if err := s.db.Exec("UPDATE jobs SET state = state, reason = 'again'").Error; err != nil {
			t.Fatal(err)
		}
		check("after every job is written with its own state")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open()
		defer s.Close()
		check("after a restart")
		for range 50 {
			change()
		}
		check("after changes since the restart")
	})
}
