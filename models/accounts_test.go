package models_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

func TestAccountsAndAudit(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTeam(ctx, "vision", 4); !errors.Is(err, models.ErrExists) {
			t.Errorf("duplicate team: %v", err)
		}
		u, err := s.CreateUser(ctx, "carol", "old", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		sess, err := s.CreateSession(ctx, u.ID, t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetPassword(ctx, "carol", "new"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, "carol", "new"); err != nil {
			t.Errorf("new password refused: %v", err)
		}
		if _, err := s.SessionUser(ctx, sess, t0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("sessions survive a password reset: %v", err)
		}
		tests := []struct {
			name string
			role models.Role
			team string
			ok   bool
		}{
			{"lead of a known team", models.RoleLead, "vision", true},
			{"admin needs no team", models.RoleAdmin, "", true},
			{"researcher needs a team", models.RoleResearcher, "", false},
			{"unknown team", models.RoleLead, "ghosts", false},
			{"unknown role", "root", "vision", false},
		}
		for _, tc := range tests {
			if err := s.SetRole(ctx, "carol", tc.role, tc.team); (err == nil) != tc.ok {
				t.Errorf("%s: err = %v", tc.name, err)
			}
		}
		tok, err := s.CreateAPIToken(ctx, u.ID, "laptop", t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.APITokens(ctx, u.ID, t0)
		if err != nil || len(list) != 1 || list[0].Name != "laptop" {
			t.Fatalf("tokens = %v, %v", list, err)
		}
		if err := s.RevokeAPIToken(ctx, u.ID+1, list[0].ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("revoking another user's token: %v", err)
		}
		if err := s.RevokeAPIToken(ctx, u.ID, list[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TokenUser(ctx, tok, t0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("revoked token still works: %v", err)
		}
		// A token revokes itself by its hash (gpuportal logout), only
		// its own user's.
		tok, err = s.CreateAPIToken(ctx, u.ID, "cli", t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeAPITokenByHash(ctx, u.ID+1, models.HashToken(tok)); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("revoking by hash as another user: %v", err)
		}
		if err := s.RevokeAPITokenByHash(ctx, u.ID, models.HashToken(tok)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TokenUser(ctx, tok, t0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("token revoked by hash still works: %v", err)
		}
		for _, a := range []string{"role.set", "job.cancel"} {
			if err := s.Audit(ctx, models.AuditEntry{At: t0, Actor: "admin", Action: a, Target: "carol", From: "127.0.0.1"}); err != nil {
				t.Fatal(err)
			}
		}
		log, err := s.AuditLog(ctx, 10)
		if err != nil || len(log) != 2 || log[0].Action != "job.cancel" {
			t.Errorf("audit log = %+v, %v", log, err)
		}
	})
}

func TestTemplates(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		tpl := &models.JobTemplate{User: "alice", Name: "resnet", Body: `{"name":"resnet","gpus":2}`}
		if err := s.CreateTemplate(ctx, tpl); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateTemplate(ctx, &models.JobTemplate{User: "alice", Name: "resnet", Body: "{}"}); !errors.Is(err, models.ErrExists) {
			t.Errorf("duplicate name: %v", err)
		}
		if err := s.CreateTemplate(ctx, &models.JobTemplate{User: "bob", Name: "resnet", Body: "{}"}); err != nil {
			t.Errorf("another user's template of the same name: %v", err)
		}
		if _, err := s.Template(ctx, "bob", tpl.ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("bob reads alice's template: %v", err)
		}
		list, err := s.Templates(ctx, "alice")
		if err != nil || len(list) != 1 || list[0].Body != tpl.Body {
			t.Errorf("templates = %+v, %v", list, err)
		}
		if err := s.DeleteTemplate(ctx, "bob", tpl.ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("bob deletes alice's template: %v", err)
		}
		if err := s.DeleteTemplate(ctx, "alice", tpl.ID); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTeamShares(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		if err := s.SetTeamShare(ctx, "vision", 8, 2, 3); err != nil {
			t.Fatal(err)
		}
		if err := s.SetTeamShare(ctx, "vision", 8, 0, 3); err == nil {
			t.Error("weight 0 accepted")
		}
		if err := s.SetTeamShare(ctx, "ghosts", 1, 1, 0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("unknown team: %v", err)
		}
		if err := s.SetTeamUsage(ctx, map[string]float64{"vision": 1234.5}, t0); err != nil {
			t.Fatal(err)
		}
		tm, err := s.Team(ctx, "vision")
		if err != nil || tm.GuaranteeGPUs != 8 || tm.Weight != 2 || tm.MaxGPUsPerUser != 3 || tm.UsageGPUSeconds != 1234.5 || !tm.UsageAt.Equal(t0) {
			t.Errorf("team = %+v, %v", tm, err)
		}
		for _, c := range []int{2, 5} { // set, then change
			if err := s.SetUserCap(ctx, "vision", "alice", c); err != nil {
				t.Fatal(err)
			}
		}
		caps, err := s.UserCaps(ctx)
		if err != nil || caps["vision"]["alice"] != 5 {
			t.Errorf("caps = %v, %v", caps, err)
		}
		if err := s.SetUserCap(ctx, "vision", "alice", 0); err != nil {
			t.Fatal(err)
		}
		if caps, _ := s.UserCaps(ctx); len(caps) != 0 {
			t.Errorf("cap kept after removal: %v", caps)
		}
		if err := s.AddTeamSamples(ctx, []models.TeamSample{{Team: "vision", At: t0, InUseGPUs: 3}, {Team: "vision", At: t0.Add(time.Minute), InUseGPUs: 9, BorrowedGPUs: 1}}); err != nil {
			t.Fatal(err)
		}
		ss, err := s.TeamSamples(ctx, "vision", t0.Add(time.Second))
		if err != nil || len(ss) != 1 || ss[0].BorrowedGPUs != 1 {
			t.Errorf("samples = %+v, %v", ss, err)
		}
		j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 2, SimDuration: 1, SubmittedAt: t0}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		run, _ := s.MarkStarted(ctx, j.ID, []string{"n:0", "n:1"}, t0)
		_ = s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run}, models.JobSucceeded, nil, "", usage.Service{}, t0.Add(10*time.Second))
		if err := s.CreateJob(ctx, &models.Job{Name: "waits", Team: "vision", User: "bob", GPUs: 1, SimDuration: 1, SubmittedAt: t0}); err != nil {
			t.Fatal(err)
		}
		mu, err := s.MemberUsage(ctx, "vision", t0.Add(-time.Hour))
		if err != nil || mu["alice"] != 20 || len(mu) != 1 {
			t.Errorf("member usage = %v, %v; want alice's 20 GPU-seconds alone (bob's job has not run)", mu, err)
		}
	})
}
