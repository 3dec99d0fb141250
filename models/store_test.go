package models_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// openStore opens dsn with bcrypt's least cost: a hash at the default
// cost takes seconds under the race detector (TestPasswordCost checks the
// default).
func openStore(t *testing.T, dsn string) *models.Store {
	t.Helper()
	s, err := models.OpenWith(context.Background(), dsn, models.Options{PasswordCost: bcrypt.MinCost})
	if err != nil {
		t.Fatalf("open %s: %v", models.RedactDSN(dsn), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPasswordCost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cost    int
		want    int    // the cost of the hashes it makes
		wantErr string // or the error opening it
	}{
		{"default", 0, bcrypt.DefaultCost, ""},
		{"least", bcrypt.MinCost, bcrypt.MinCost, ""},
		{"below the least", bcrypt.MinCost - 1, 0, "password cost 3: must be between 4 and 31"},
		{"above the most", bcrypt.MaxCost + 1, 0, "password cost 32: must be between 4 and 31"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := models.OpenWith(ctx, modelstest.SQLiteDSN(t), models.Options{PasswordCost: tc.cost})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("open: err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			u, err := s.CreateUser(ctx, "alice", "s3cret", models.RoleResearcher, "vision")
			if err != nil {
				t.Fatal(err)
			}
			if got, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil || got != tc.want {
				t.Errorf("hash cost = %d, %v; want %d", got, err, tc.want)
			}
			if _, err := s.Authenticate(ctx, "alice", "s3cret"); err != nil {
				t.Errorf("authenticate: %v", err)
			}
			if _, err := s.Authenticate(ctx, "nobody", "s3cret"); !errors.Is(err, models.ErrBadCredentials) {
				t.Errorf("authenticate nobody: err = %v, want ErrBadCredentials", err)
			}
		})
	}
}

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestUsersSessionsTokens(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		u, err := s.CreateUser(ctx, "alice", "s3cret", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateUser(ctx, "alice", "x", models.RoleResearcher, ""); !errors.Is(err, models.ErrExists) {
			t.Errorf("duplicate user: err = %v, want ErrExists", err)
		}
		if _, err := s.CreateUser(ctx, "eve", "x", "root", ""); err == nil {
			t.Error("unknown role accepted")
		}
		if u.PasswordHash == "s3cret" {
			t.Error("password stored in clear")
		}
		if _, err := s.Authenticate(ctx, "alice", "wrong"); !errors.Is(err, models.ErrBadCredentials) {
			t.Errorf("wrong password: err = %v", err)
		}
		if _, err := s.Authenticate(ctx, "nobody", "s3cret"); !errors.Is(err, models.ErrBadCredentials) {
			t.Errorf("unknown user: err = %v", err)
		}
		if got, err := s.Authenticate(ctx, "alice", "s3cret"); err != nil || got.ID != u.ID {
			t.Fatalf("authenticate: %v, %v", got, err)
		}

		tok, err := s.CreateSession(ctx, u.ID, t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.SessionUser(ctx, tok, t0.Add(time.Minute)); err != nil || got.Name != "alice" {
			t.Errorf("session user = %v, %v", got, err)
		}
		if _, err := s.SessionUser(ctx, tok, t0.Add(2*time.Hour)); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("expired session: err = %v", err)
		}
		if err := s.DeleteSession(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SessionUser(ctx, tok, t0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("deleted session: err = %v", err)
		}

		api, err := s.CreateAPIToken(ctx, u.ID, "cli", t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.TokenUser(ctx, api, t0); err != nil || got.ID != u.ID {
			t.Errorf("token user = %v, %v", got, err)
		}
		if _, err := s.TokenUser(ctx, api+"x", t0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("wrong token: err = %v", err)
		}
	})
}

func TestJobLifeCycle(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		j := &models.Job{Name: "resnet", Team: "vision", User: "alice", GPUs: 2,
			Command: models.Strings{"python", "train.py"}, SubmittedAt: t0}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if j.ID == 0 || j.State != models.JobQueued {
			t.Fatalf("created job = %+v", j)
		}
		if run, err := s.MarkStarted(ctx, j.ID, []string{"node-0:0", "node-0:1"}, t0.Add(10*time.Second)); err != nil || run != 1 {
			t.Fatalf("first start: run %d, err %v; want run 1", run, err)
		}
		if _, err := s.MarkStarted(ctx, j.ID, nil, t0); !errors.Is(err, models.ErrConflict) {
			t.Errorf("start twice: err = %v", err)
		}
		// The run's last 4 s were its handover: counted, but not toward
		// its queue (CycleService).
		if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: 1}, models.JobPreempted, nil, "preempted by job 9", usage.Service{ExecutedS: 4, GPUSeconds: 8}, t0.Add(20*time.Second)); err != nil {
			t.Fatal(err)
		}
		if run, err := s.MarkStarted(ctx, j.ID, []string{"node-1:0", "node-1:1"}, t0.Add(30*time.Second)); err != nil || run != 2 {
			t.Fatalf("second start: run %d, err %v; want run 2", run, err)
		}
		zero := 0
		// The end of the first run, reported late, changes nothing.
		if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: 1}, models.JobSucceeded, &zero, "", usage.Service{}, t0.Add(40*time.Second)); !errors.Is(err, models.ErrStaleRun) || !errors.Is(err, models.ErrConflict) {
			t.Errorf("end of a replaced run: err = %v, want ErrStaleRun", err)
		}
		if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: 2}, models.JobSucceeded, &zero, "", usage.Service{}, t0.Add(60*time.Second)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := struct {
			state       models.JobState
			executed    float64
			attained    float64
			preemptions int
			jct         time.Duration
		}{models.JobSucceeded, 40, 80, 1, 60 * time.Second}
		if got.State != want.state || got.ExecutedS != want.executed || got.AttainedService != want.attained ||
			got.Preemptions != want.preemptions || got.JCT() != want.jct {
			t.Errorf("job after run = state %s executed %v attained %v preemptions %d jct %v; want %+v",
				got.State, got.ExecutedS, got.AttainedService, got.Preemptions, got.JCT(), want)
		}
		if got.CycleService != 8 || got.CycleExecuted != 4 {
			t.Errorf("cycle service %v, cycle executed %v; want the first run's handover, 8 GPU-s and 4 s, left out of its queue",
				got.CycleService, got.CycleExecuted)
		}
		if !got.StartedAt.Equal(t0.Add(10*time.Second)) || got.ExitCode == nil || *got.ExitCode != 0 {
			t.Errorf("started %v exit %v", got.StartedAt, got.ExitCode)
		}
		if len(got.Command) != 2 || got.Command[1] != "train.py" || len(got.Placement) != 2 {
			t.Errorf("command %q placement %q", got.Command, got.Placement)
		}
		if _, err := s.Job(ctx, 9999); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("unknown job: err = %v", err)
		}
	})
}

func TestListCancelAndReasons(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		for i, owner := range []string{"alice", "bob", "alice"} {
			team := map[string]string{"alice": "vision", "bob": "nlp"}[owner]
			j := &models.Job{Name: "j", Team: team, User: owner, GPUs: 1, SimDuration: 10, SubmittedAt: t0.Add(time.Duration(i) * time.Second)}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			name string
			f    models.JobFilter
			want []int64
		}{
			{"all, newest first", models.JobFilter{}, []int64{3, 2, 1}},
			{"by user", models.JobFilter{User: "alice"}, []int64{3, 1}},
			{"by team", models.JobFilter{Team: "nlp"}, []int64{2}},
			{"limit", models.JobFilter{Limit: 1}, []int64{3}},
			{"by state", models.JobFilter{States: []models.JobState{models.JobRunning}}, nil},
		}
		for _, tc := range tests {
			js, err := s.ListJobs(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, j := range js {
				ids = append(ids, j.ID)
			}
			if len(ids) != len(tc.want) || (len(ids) > 0 && ids[0] != tc.want[0]) {
				t.Errorf("%s: ids %v, want %v", tc.name, ids, tc.want)
			}
		}
		if err := s.SetReasons(ctx, map[int64]string{1: "needs 1 GPU"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Cancel(ctx, 1, "cancelled by alice", t0); err != nil {
			t.Fatal(err)
		}
		if err := s.Cancel(ctx, 1, "again", t0); !errors.Is(err, models.ErrConflict) {
			t.Errorf("cancel twice: err = %v", err)
		}
		counts, err := s.CountJobsByState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if counts[models.JobCancelled] != 1 || counts[models.JobQueued] != 2 {
			t.Errorf("counts = %v", counts)
		}
		un, err := s.UnfinishedJobs(ctx)
		if err != nil || len(un) != 2 || un[0].ID != 2 {
			t.Errorf("unfinished = %v, %v", un, err)
		}
	})
}

func TestRedactDSN(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://u:pw@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"sqlite:/tmp/x.db", "sqlite:/tmp/x.db"},
	}
	for _, tc := range tests {
		if got := models.RedactDSN(tc.in); got != tc.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRetryAndHistory(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		j := &models.Job{Name: "flaky", Team: "vision", User: "alice", GPUs: 1, SimDuration: 10, SubmittedAt: t0}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkStarted(ctx, j.ID, []string{"n:0"}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		retryAt := t0.Add(time.Minute)
		if err := s.MarkRetry(ctx, job.RunRef{Job: j.ID, Run: 1}, 2, "exit code 2; retry 1 of 3", retryAt, t0.Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != models.JobQueued || got.Failures != 1 || got.RetryAt == nil || !got.RetryAt.Equal(retryAt) ||
			*got.ExitCode != 2 || got.ExecutedS != 4 {
			t.Errorf("after retry: %+v", got)
		}
		if err := s.MarkRetry(ctx, job.RunRef{Job: j.ID, Run: 1}, 2, "again", retryAt, t0); !errors.Is(err, models.ErrConflict) {
			t.Errorf("retry of a queued job: %v", err)
		}
		if _, err := s.MarkStarted(ctx, j.ID, []string{"n:1"}, t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Job(ctx, j.ID); got.RetryAt != nil {
			t.Errorf("retry time kept after the restart: %v", got.RetryAt)
		}
		es, err := s.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, e := range es {
			steps = append(steps, string(e.State)+": "+e.Detail)
		}
		want := []string{"queued: submitted", "running: on n:0", "queued: exit code 2; retry 1 of 3", "running: on n:1"}
		if strings.Join(steps, "|") != strings.Join(want, "|") {
			t.Errorf("history = %q, want %q", steps, want)
		}
	})
}
