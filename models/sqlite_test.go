package models

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSQLiteSettings checks what Open promises an SQLite database: a
// current engine (the pure-Go modernc build, no cgo), and on its one
// connection WAL, a busy timeout, foreign keys and synchronous=NORMAL.
func TestSQLiteSettings(t *testing.T) {
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
