package models_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpuportal/gpuportal/models"
)

// TestAccountControl disables, enables and deletes an account and checks
// what each ends, holds and keeps.
func TestAccountControl(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		u, err := s.CreateUser(ctx, "carol", "password1", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		sess, err := s.CreateSession(ctx, u.ID, t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := s.CreateAPIToken(ctx, u.ID, "laptop", t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		waiting := &models.Job{Name: "w", Team: "vision", User: "carol", GPUs: 1, SimDuration: 60, SubmittedAt: t0}
		if err := s.CreateJob(ctx, waiting); err != nil {
			t.Fatal(err)
		}

		held, err := s.DisableUser(ctx, "carol", "root", t0)
		if err != nil || held != 1 {
			t.Fatalf("disable: held %d, %v", held, err)
		}
		if _, err := s.SessionUser(ctx, sess, t0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a disabled user's session still works: %v", err)
		}
		if _, err := s.TokenUser(ctx, tok, t0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a disabled user's token still works: %v", err)
		}
		if _, err := s.Authenticate(ctx, "carol", "password1"); !errors.Is(err, models.ErrDisabled) {
			t.Errorf("a disabled user logs in: %v", err)
		}
		if _, err := s.Authenticate(ctx, "carol", "wrong"); !errors.Is(err, models.ErrBadCredentials) {
			t.Errorf("a wrong password for a disabled user: %v, want bad credentials (the account's state is not told)", err)
		}
		j, err := s.Job(ctx, waiting.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !j.Held() || !strings.Contains(j.Reason, "disabled by root") {
			t.Errorf("waiting job after disable: held %v, reason %q", j.Held(), j.Reason)
		}
		ejs, err := s.JobsToSchedule(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ejs) != 0 {
			t.Errorf("the engine sees %d jobs of a disabled user, want 0", len(ejs))
		}
		if _, err := s.MarkStarted(ctx, waiting.ID, []string{"n:0"}, t0); !errors.Is(err, models.ErrConflict) {
			t.Errorf("a held job started: %v", err)
		}

		released, err := s.EnableUser(ctx, "carol", t0)
		if err != nil || released != 1 {
			t.Fatalf("enable: released %d, %v", released, err)
		}
		if _, err := s.TokenUser(ctx, tok, t0); err != nil {
			t.Errorf("the token of a re-enabled user: %v", err)
		}
		if j, _ := s.Job(ctx, waiting.ID); j.Held() {
			t.Errorf("job still held after enable: %q", j.HoldReason)
		}

		if _, err := s.DeleteUser(ctx, "carol", "root", t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UserByName(ctx, "carol"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("deleted user found: %v", err)
		}
		if _, err := s.TokenUser(ctx, tok, t0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a deleted user's token works: %v", err)
		}
		j, err = s.Job(ctx, waiting.ID)
		if err != nil {
			t.Fatalf("a deleted user's job is gone: %v", err)
		}
		if !j.Held() || !strings.Contains(j.Reason, "deleted") {
			t.Errorf("job of a deleted user: held %v, reason %q", j.Held(), j.Reason)
		}
		if _, err := s.DeleteUser(ctx, "carol", "root", t0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("delete twice: %v", err)
		}
	})
}

// TestPasswordResetEndsTokens: whoever knew the old password may have
// made a token with it.
func TestPasswordResetEndsTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, models.Migrated.SQLiteDSN(t))
	if _, err := s.CreateTeam(ctx, "vision", 1); err != nil {
		t.Fatal(err)
	}
	u, err := s.CreateUser(ctx, "carol", "password1", models.RoleResearcher, "vision")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.CreateAPIToken(ctx, u.ID, "laptop", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(ctx, "carol", "password2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TokenUser(ctx, tok, t0); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a token survives a password reset: %v", err)
	}
}

// TestCredentialUsers checks many credentials at once, as live
// connections are.
func TestCredentialUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore(t, models.Migrated.SQLiteDSN(t))
	if _, err := s.CreateTeam(ctx, "vision", 1); err != nil {
		t.Fatal(err)
	}
	var live, dead []string
	for i, name := range []string{"a1", "a2", "a3"} {
		u, err := s.CreateUser(ctx, name, "password1", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		tok, err := s.CreateSession(ctx, u.ID, t0, time.Duration(i)*time.Hour) // a1's has expired
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			dead = append(dead, models.HashToken(tok))
		} else {
			live = append(live, models.HashToken(tok))
		}
	}
	if _, err := s.DisableUser(ctx, "a3", "root", t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.SessionUsers(ctx, append(append([]string{}, live...), dead...), t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[live[0]].Name != "a2" {
		t.Errorf("live sessions: %v, want a2's only (a1's expired, a3 disabled)", got)
	}
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
	}{
		{"alice", true},
		{"team-2.gpu_x", true},
		{"A", true},
		{"", false},
		{" alice", false},
		{"alice ", false},
		{"-alice", false},
		{"al ice", false},
		{"al/ice", false},
		{"al\tice", false},
		{"ålice", false},
		{strings.Repeat("a", models.MaxNameLen), true},
		{strings.Repeat("a", models.MaxNameLen+1), false},
	}
	for _, tc := range tests {
		if err := models.CheckName(tc.name); (err == nil) != tc.ok {
			t.Errorf("CheckName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestCause(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"bad input", errors.New("name: is required"), ""},
		{"not found", fmt.Errorf("user x: %w", models.ErrNotFound), ""},
		{"ENOSPC", fmt.Errorf("write: %w", syscall.ENOSPC), "disk full"},
		{"SQLite message", errors.New("database or disk is full (13)"), "disk full"},
		{"PostgreSQL disk full", &pgconn.PgError{Code: "53100"}, "disk full"},
		{"PostgreSQL shutting down", &pgconn.PgError{Code: "57P01"}, "database unreachable"},
		{"PostgreSQL unique", &pgconn.PgError{Code: "23505"}, ""},
		{"connection closed mid-query", fmt.Errorf("API token: %w", io.ErrUnexpectedEOF), "database unreachable"},
	}
	for _, tc := range tests {
		if got := models.Cause(tc.err); got != tc.want {
			t.Errorf("%s: Cause = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckWriteOnAFullDisk is in the integration tests (a tmpfs needs
// root); here the probe works on a healthy store and leaves nothing.
func TestCheckWrite(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openStore(t, dsn)
		for range 3 {
			if err := s.CheckWrite(context.Background(), t0); err != nil {
				t.Fatal(err)
			}
		}
	})
}
