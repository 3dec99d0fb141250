package models_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

func openWithKey(t *testing.T, dsn string, key *models.SessionKey, replace bool) (*models.Store, error) {
	t.Helper()
	s, err := models.OpenWith(context.Background(), dsn, models.Options{PasswordCost: bcrypt.MinCost, SessionKey: key, ReplaceSessionKey: replace})
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func newKey(t *testing.T) *models.SessionKey {
	t.Helper()
	k, err := models.NewSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	return &k
}

func newSession(t *testing.T, s *models.Store, secret, token string) *models.Job {
	t.Helper()
	j := &models.Job{Name: "nb", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(),
		SessionType: "jupyter", SessionSecret: secret, SessionToken: token}
	if err := s.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j
}

// secretOf is the secret part of a session's URL.
func secretOf(t *testing.T, prefix string) string {
	t.Helper()
	parts := strings.Split(strings.Trim(prefix, "/"), "/")
	if len(parts) != 3 || parts[0] != "sessions" || len(parts[2]) < 40 {
		t.Fatalf("session URL %q: want /sessions/ID/SECRET/ with a secret of 32 bytes", prefix)
	}
	return parts[2]
}

// A copy of the database opens no session: it holds a salt, and the URL
// secret and token are derived from it with a key kept outside.
func TestSessionSecretsAreNotStored(t *testing.T) {
	t.Parallel()
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		key := newKey(t)
		s, err := openWithKey(t, dsn, key, false)
		if err != nil {
			t.Fatal(err)
		}
		salt, err := models.NewSessionSalt()
		if err != nil {
			t.Fatal(err)
		}
		a := newSession(t, s, salt, "")
		b := newSession(t, s, salt, "")
		secret, token := secretOf(t, s.SessionPrefix(a)), s.SessionToken(a)
		if len(token) < 40 || token == secret {
			t.Fatalf("token %q, secret %q: want two different 32-byte secrets", token, secret)
		}
		if s.SessionPrefix(b) == s.SessionPrefix(a) || s.SessionToken(b) == token {
			t.Errorf("two sessions with one salt share their secrets")
		}
		if js := s.JobSession(a); js.BaseURL != s.SessionPrefix(a) || js.Token != token {
			t.Errorf("the machines start %+v, the portal serves %s with token %s", js, s.SessionPrefix(a), token)
		}
		stored, err := s.Job(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, col := range []string{stored.SessionSecret, stored.SessionToken} {
			if strings.Contains(col, secret) || strings.Contains(col, token) {
				t.Errorf("the jobs table holds a session secret: %q", col)
			}
		}
		if stored.SessionToken != "" {
			t.Errorf("session_token = %q, want it empty", stored.SessionToken)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		// The same key opens the same sessions; another is refused.
		again, err := openWithKey(t, dsn, key, false)
		if err != nil {
			t.Fatalf("reopen with the same key: %v", err)
		}
		if got := again.SessionPrefix(stored); got != models.SessionPath(a.ID, secret) {
			t.Errorf("after a restart the session is at %s, was %s", got, models.SessionPath(a.ID, secret))
		}
		again.Close()
		other := newKey(t)
		if _, err := openWithKey(t, dsn, other, false); !errors.Is(err, models.ErrSessionKeyMismatch) {
			t.Fatalf("open with another key: %v, want ErrSessionKeyMismatch", err)
		}
		replaced, err := openWithKey(t, dsn, other, true)
		if err != nil {
			t.Fatalf("replace the key: %v", err)
		}
		if replaced.SessionPrefix(stored) == models.SessionPath(a.ID, secret) {
			t.Errorf("another key derives the same secret")
		}
		replaced.Close()
		if _, err := openWithKey(t, dsn, key, false); !errors.Is(err, models.ErrSessionKeyMismatch) {
			t.Fatalf("after the key was replaced, the old one opens the database: %v", err)
		}
	})
}

// Secrets an earlier version stored in clear leave the database at the
// first start with a key, but those of a session running then, whose
// process holds its token.
func TestLegacySessionSecretsAreSealed(t *testing.T) {
	t.Parallel()
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		old, err := openWithKey(t, dsn, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		waiting := newSession(t, old, "clear-secret-waiting", "clear-token-waiting")
		running := newSession(t, old, "clear-secret-running", "clear-token-running")
		done := newSession(t, old, "clear-secret-done", "clear-token-done")
		now := time.Now()
		if _, err := old.MarkStarted(ctx, running.ID, []string{"n1:0"}, now); err != nil {
			t.Fatal(err)
		}
		if err := old.Cancel(ctx, done.ID, "test", now); err != nil {
			t.Fatal(err)
		}
		old.Close()

		s, err := openWithKey(t, dsn, newKey(t), false)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			j      *models.Job
			sealed bool
		}{{waiting, true}, {running, false}, {done, true}} {
			j, err := s.Job(ctx, c.j.ID)
			if err != nil {
				t.Fatal(err)
			}
			clear := strings.HasPrefix(j.SessionSecret, "clear-") || strings.HasPrefix(j.SessionToken, "clear-")
			switch {
			case c.sealed && clear:
				t.Errorf("%s job %d still holds its secrets in clear: %q %q", j.State, j.ID, j.SessionSecret, j.SessionToken)
			case c.sealed:
				secretOf(t, s.SessionPrefix(j))
			case s.SessionPrefix(j) != models.SessionPath(j.ID, "clear-secret-running") || s.SessionToken(j) != "clear-token-running":
				t.Errorf("the running session moved to %s (token %s): its process holds the old ones", s.SessionPrefix(j), s.SessionToken(j))
			}
		}
		if st, _ := s.JobStates(ctx, []int64{running.ID}); st[running.ID] != job.Running {
			t.Fatalf("running job is %s", st[running.ID])
		}
	})
}

func TestLoadSessionKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "keys", "session.key")
	if _, err := models.LoadSessionKey(path, false); err == nil {
		t.Fatal("a missing key file named by the operator was made")
	}
	made, err := models.LoadSessionKey(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v, want 0600", err, info.Mode().Perm())
	}
	read, err := models.LoadSessionKey(path, true)
	if err != nil || read != made {
		t.Fatalf("reread: %v, same key %v", err, read == made)
	}
	for _, c := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"readable by others", "", 0o644, "chmod 600"},
		{"not base64", "not a key\n", 0o600, "base64"},
		{"too short", "c2hvcnQ=\n", 0o600, "32 random bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			content := c.content
			if content == "" {
				b, _ := os.ReadFile(path)
				content = string(b)
			}
			if err := os.WriteFile(p, []byte(content), c.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, c.mode); err != nil {
				t.Fatal(err)
			}
			_, err := models.LoadSessionKey(p, true)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("LoadSessionKey: %v, want an error saying %q", err, c.want)
			}
		})
	}
}
