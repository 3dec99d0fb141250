// Package modelstest gives tests throwaway databases: a SQLite file and,
// where one runs, a fresh PostgreSQL database dropped when the test ends.
package modelstest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
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
	admin := adminDSN()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", admin)
	if err == nil {
		err = db.PingContext(ctx)
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		noPostgres(t, errNoPostgres{admin, err})
	}
	t.Cleanup(func() { db.Close() })
	return newDatabase(t, db, admin, "")
}

// adminDSN is the PostgreSQL server the tests use.
func adminDSN() string {
	if admin := os.Getenv("GPUPORTAL_TEST_POSTGRES"); admin != "" {
		return admin
	}
	return AdminDSN
}

// errNoPostgres says that no PostgreSQL server answers at admin.
type errNoPostgres struct {
	admin string
	err   error
}

func (e errNoPostgres) Error() string { return fmt.Sprintf("no PostgreSQL at %s: %v", e.admin, e.err) }

// noPostgres skips t, or fails it when CI=true, for want of a server.
func noPostgres(t testing.TB, e errNoPostgres) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("PostgreSQL is required in CI: %v", e.err)
	}
	t.Skip(e.Error())
}

// randomHex is 12 random hexadecimal digits, for a database's name.
func randomHex() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// newDatabase creates a database on db's server (whose DSN is admin) with
// the CREATE DATABASE options opts, drops it when t ends, and returns its
// DSN.
func newDatabase(t testing.TB, db *sql.DB, admin, opts string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "gpuportal_test_" + randomHex()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" "+opts); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return dsnOf(admin, name)
}

// dsnOf is the DSN of the database name on admin's server.
func dsnOf(admin, name string) string {
	u, err := url.Parse(admin)
	if err != nil {
		panic(fmt.Sprintf("modelstest: parse %s: %v", admin, err)) // it connected: it parses
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

// Template is a database made once per test binary (by Make: migrated,
// say) and copied for each test that asks for one, so that the tests of a
// package do not each run every migration step. Its zero value with Make
// set is ready; Close, from TestMain, removes what it made.
type Template struct {
	// Make brings the empty database dsn to what every copy starts from.
	// It must close its connections before it returns: PostgreSQL copies
	// a database no one is connected to.
	Make func(ctx context.Context, dsn string) error

	sqliteOnce sync.Once
	sqliteDir  string // the folder of the made SQLite file
	sqliteErr  error

	pgOnce  sync.Once
	pgAdmin *sql.DB // the server the template is on
	pgAdm   string  // its admin DSN
	pgName  string  // the template database's name
	pgErr   error
}

// templateFile is the made SQLite database's name in its folder.
const templateFile = "gpuportal.db"

// processTemp is the temporary folder the process started with: the
// template outlives any test, and one that points TMPDIR elsewhere (to
// see what a request spools there) must neither find it there nor take
// it along when its folder goes.
var processTemp = os.TempDir()

// SQLiteDSN returns a DSN for a new SQLite file under t's temporary
// folder holding a copy of the template.
func (tp *Template) SQLiteDSN(t testing.TB) string {
	t.Helper()
	tp.sqliteOnce.Do(func() {
		dir, err := os.MkdirTemp(processTemp, "gpuportal-template-*")
		if err != nil {
			tp.sqliteErr = fmt.Errorf("template folder: %w", err)
			return
		}
		tp.sqliteDir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := tp.Make(ctx, "sqlite:"+filepath.Join(dir, templateFile)); err != nil {
			tp.sqliteErr = fmt.Errorf("make the SQLite template: %w", err)
		}
	})
	if tp.sqliteErr != nil {
		t.Fatal(tp.sqliteErr)
	}
	dir := t.TempDir()
	// The database and, should one be left, its write-ahead log.
	for _, suffix := range []string{"", "-wal"} {
		err := copyFile(filepath.Join(tp.sqliteDir, templateFile+suffix), filepath.Join(dir, templateFile+suffix))
		if errors.Is(err, fs.ErrNotExist) && suffix != "" {
			continue
		}
		if err != nil {
			t.Fatalf("copy the SQLite template: %v", err)
		}
	}
	return "sqlite:" + filepath.Join(dir, templateFile)
}

// copyFile copies the file from to a new owner-only file to.
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return dst.Close()
}

// PostgresDSN creates a PostgreSQL database for t, a copy of the
// template, and drops it when t ends. Without a reachable server it skips
// t, or fails it when CI=true.
func (tp *Template) PostgresDSN(t testing.TB) string {
	t.Helper()
	tp.pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		tp.pgAdm = adminDSN()
		db, err := sql.Open("pgx", tp.pgAdm)
		if err == nil {
			err = db.PingContext(ctx)
		}
		if err != nil {
			if db != nil {
				db.Close()
			}
			tp.pgErr = errNoPostgres{tp.pgAdm, err}
			return
		}
		name := "gpuportal_template_" + randomHex()
		if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			db.Close()
			tp.pgErr = fmt.Errorf("create the template database: %w", err)
			return
		}
		tp.pgAdmin, tp.pgName = db, name
		if err := tp.Make(ctx, dsnOf(tp.pgAdm, name)); err != nil {
			tp.pgErr = fmt.Errorf("make the PostgreSQL template: %w", err)
		}
	})
	var none errNoPostgres
	switch {
	case errors.As(tp.pgErr, &none):
		noPostgres(t, none)
	case tp.pgErr != nil:
		t.Fatal(tp.pgErr)
	}
	return newDatabase(t, tp.pgAdmin, tp.pgAdm, "TEMPLATE "+tp.pgName)
}

// ForEachDB runs f as a subtest on a copy of the template in SQLite and
// in PostgreSQL.
func (tp *Template) ForEachDB(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, tp.SQLiteDSN(t)) })
	t.Run("postgres", func(t *testing.T) { f(t, tp.PostgresDSN(t)) })
}

// Close removes the template's SQLite file and drops its PostgreSQL
// database, those it made.
func (tp *Template) Close() error {
	var errs []error
	if tp.sqliteDir != "" {
		errs = append(errs, os.RemoveAll(tp.sqliteDir))
	}
	if tp.pgAdmin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := tp.pgAdmin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+tp.pgName+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("drop the template database %s: %w", tp.pgName, err))
		}
		errs = append(errs, tp.pgAdmin.Close())
	}
	return errors.Join(errs...)
}

// Main runs a package's tests (a TestMain's m) and then Close, and exits:
// with 1 when the tests passed but the template could not be removed.
func (tp *Template) Main(m *testing.M) {
	code := m.Run()
	if err := tp.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Gorm opens dsn's database with gorm alone, beside any store on it: no
// migration runs, and SQLite waits up to 10 s for a lock. Tests and
// benchmarks write rows with it that the store's own calls would refuse
// or stamp (NULLs, old versions' rows, seed data in batches). It is
// closed when t ends.
func Gorm(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	var d gorm.Dialector
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		d = sqlite.Open(path + "?_pragma=busy_timeout(10000)")
	} else {
		d = postgres.Open(dsn)
	}
	db, err := gorm.Open(d, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatalf("open the test database with gorm: %v", err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return db
}
