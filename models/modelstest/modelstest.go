// Package modelstest gives tests throwaway databases: a SQLite file and,
// where one runs, a fresh PostgreSQL database dropped when the test ends.
package modelstest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// AdminDSN is the PostgreSQL server tests use unless GPUPORTAL_TEST_POSTGRES
// names another: the CI and development machines run one with trust auth.
const AdminDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// SQLiteDSN returns a DSN for a new SQLite file under t's temporary folder.
func SQLiteDSN(t testing.TB) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "gpuportal.db")
}

// PostgresDSN creates an empty PostgreSQL database for t and drops it when t
// ends. Without a reachable server it skips t, or fails it when CI=true.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("GPUPORTAL_TEST_POSTGRES")
	if admin == "" {
		admin = AdminDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", admin)
	if err == nil {
		err = db.PingContext(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is required in CI: %v", err)
		}
		t.Skipf("no PostgreSQL at %s: %v", admin, err)
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "gpuportal_test_" + hex.EncodeToString(b)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		db.Close()
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
		db.Close()
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", admin, err)
	}
	u.Path = "/" + name
	return u.String()
}

// ForEachDB runs f as a subtest on a fresh SQLite database and on a fresh
// PostgreSQL database, so that a store test checks both.
func ForEachDB(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, SQLiteDSN(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, PostgresDSN(t)) })
}
