package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestSQLiteSettings checks what Open promises an SQLite database: a
// current engine (the pure-Go modernc build, no cgo), and on its one
// connection WAL, a busy timeout, foreign keys and synchronous=NORMAL.
func TestSQLiteSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "gpuportal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var version string
	if err := s.db.WithContext(ctx).Raw("SELECT sqlite_version()").Scan(&version).Error; err != nil {
		t.Fatal(err)
	}
	// 3.50 is from 2025; the 2023 driver this replaced shipped 3.41.
	if !versionAtLeast(version, 3, 50) {
		t.Errorf("sqlite_version() = %s; want 3.50 or newer", version)
	}

	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"busy_timeout", "10000"},
		{"foreign_keys", "1"},
		{"synchronous", "1"}, // NORMAL
	} {
		var got string
		if err := s.db.WithContext(ctx).Raw("PRAGMA " + tc.pragma).Scan(&got).Error; err != nil {
			t.Fatalf("PRAGMA %s: %v", tc.pragma, err)
		}
		if !strings.EqualFold(got, tc.want) {
			t.Errorf("PRAGMA %s = %q; want %q", tc.pragma, got, tc.want)
		}
	}
}

// versionAtLeast reports whether a dotted version such as 3.51.1 is at
// least major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// A SQLite database and its write-ahead log are readable by the server's
// account alone, a new one and one an older version left open to all.
func TestSQLiteFilesOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "gpuportal.db")
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s is %04o, want 0600", when, filepath.Base(p), fi.Mode().Perm())
			}
		}
	}
	open := func() *Store {
		s, err := OpenWith(context.Background(), "sqlite:"+path, Options{PasswordCost: bcrypt.MinCost})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTeam(context.Background(), fmt.Sprint("t", time.Now().UnixNano()), 1); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	check("new")
	s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Chmod(p, 0o644)
	}
	s = open()
	defer s.Close()
	check("reopened after an older version")
}
