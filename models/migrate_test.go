package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/gpuportal/gpuportal/models/modelstest"
)

// freshDSN returns another empty database of the same kind as dsn.
func freshDSN(t *testing.T, dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return modelstest.SQLiteDSN(t)
	}
	return modelstest.PostgresDSN(t)
}

func openTestStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", RedactDSN(dsn), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestUpgradeFromBaseline builds the schema of the last release the way it
// made it (AutoMigrate of its structs, no schema_migrations), fills it,
// and checks that opening it with today's code keeps every row and adds
// the new columns.
func TestUpgradeFromBaseline(t *testing.T) {
	t.Parallel()
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		old := modelstest.Gorm(t, dsn)
		if err := old.AutoMigrate(baselineModels()...); err != nil {
			t.Fatalf("previous schema: %v", err)
		}
		at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
		started := at.Add(time.Minute)
		code := 3
		rows := []any{
			&v1User{Name: "alice", PasswordHash: "$2a$10$hash", Role: "researcher", Team: "vision", CreatedAt: at},
			&v1Team{Name: "vision", GuaranteeGPUs: 4, Weight: 1.5, MaxGPUsPerUser: 2, UsageGPUSeconds: 360, UsageAt: at, CreatedAt: at},
			&v1Job{Name: "resnet", Team: "vision", User: "alice", GPUs: 2, Command: `["python","train.py"]`,
				State: "running", Reason: "", SubmittedAt: at, StartedAt: &started, LastStartAt: &started,
				Placement: `["node-0:0","node-0:1"]`, AttainedService: 120, QueueIndex: 1, ExitCode: &code},
			&v1Job{Name: "bert", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, Command: "[]", Placement: "[]", State: "queued", Reason: "submitted", SubmittedAt: at},
			&v1JobEvent{JobID: 1, At: at, State: "queued", Detail: "submitted"},
			&v1JobTemplate{User: "alice", Name: "resnet", Body: `{"name":"resnet"}`, CreatedAt: at},
			&v1UserCap{Team: "vision", User: "alice", MaxGPUs: 2},
			&v1TeamSample{Team: "vision", At: at, InUseGPUs: 2, GuaranteeGPUs: 4},
			&v1AuditEntry{At: at, Actor: "root", Action: "set-role", Target: "alice", From: "cli"},
			&v1Session{TokenHash: strings.Repeat("a", 64), UserID: 1, CreatedAt: at, ExpiresAt: at.Add(time.Hour)},
			&v1APIToken{TokenHash: strings.Repeat("b", 64), UserID: 1, Name: "ci", CreatedAt: at, ExpiresAt: at.Add(time.Hour)},
		}
		for _, r := range rows {
			if err := old.Create(r).Error; err != nil {
				t.Fatalf("insert %T: %v", r, err)
			}
		}

		s := openTestStore(t, dsn)
		j, err := s.Job(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if j.Name != "resnet" || j.State != JobRunning || j.GPUs != 2 || j.AttainedService != 120 || j.QueueIndex != 1 ||
			strings.Join(j.Command, " ") != "python train.py" || strings.Join(j.Placement, ",") != "node-0:0,node-0:1" ||
			j.StartedAt == nil || !j.StartedAt.Equal(started) || j.ExitCode == nil || *j.ExitCode != 3 {
			t.Errorf("job 1 after the upgrade = %+v", j)
		}
		if j.Sharing || j.GPUFraction != 0 || j.MemPersistentMiB != 0 || j.MemSource != "" || j.CancelRequest != "" {
			t.Errorf("new columns of an old job are not zero: %+v", j)
		}
		unfinished, err := s.JobsToSchedule(ctx)
		if err != nil || len(unfinished) != 2 {
			t.Errorf("unfinished jobs after the upgrade = %d, %v; want 2", len(unfinished), err)
		}
		if u, err := s.UserByName(ctx, "alice"); err != nil || u.Role != RoleResearcher || u.Team != "vision" {
			t.Errorf("user alice = %+v, %v", u, err)
		}
		if tm, err := s.Team(ctx, "vision"); err != nil || tm.GuaranteeGPUs != 4 || tm.Weight != 1.5 || tm.UsageGPUSeconds != 360 {
			t.Errorf("team vision = %+v, %v", tm, err)
		}
		if caps, err := s.UserCaps(ctx); err != nil || caps["vision"]["alice"] != 2 {
			t.Errorf("caps = %v, %v", caps, err)
		}
		if ts, err := s.Templates(ctx, "alice"); err != nil || len(ts) != 1 || ts[0].Body != `{"name":"resnet"}` {
			t.Errorf("templates = %+v, %v", ts, err)
		}
		if es, err := s.JobEvents(ctx, 1); err != nil || len(es) != 1 {
			t.Errorf("history = %+v, %v", es, err)
		}
		if log, err := s.AuditLog(ctx, 10); err != nil || len(log) != 1 || log[0].Target != "alice" {
			t.Errorf("audit log = %+v, %v", log, err)
		}
		// Writes to the new columns work on old rows.
		if err := s.RequestCancel(ctx, 1, "cancelled by bob", at.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if j, _ := s.Job(ctx, 1); j.CancelRequest != "cancelled by bob" {
			t.Errorf("cancel request = %q", j.CancelRequest)
		}
		for _, m := range currentModels() {
			if !s.db.Migrator().HasTable(m) {
				t.Errorf("no table for %T after the upgrade", m)
			}
		}
		if err := checkColumns(s.db, currentModels()); err != nil {
			t.Errorf("after the upgrade: %v", err)
		}
		checkVersions(t, s.db)
	})
}

// checkVersions checks that every step is recorded once.
func checkVersions(t *testing.T, db *gorm.DB) {
	t.Helper()
	var got []int
	if err := db.Model(&schemaMigration{}).Order("version").Pluck("version", &got).Error; err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range migrations() {
		want = append(want, m.version)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("schema_migrations = %v, want %v", got, want)
	}
}

// TestFreshSchemaMatchesModels migrates an empty database and compares its
// tables and columns with those gorm derives from today's structs: a
// field added without a migration step fails here.
func TestFreshSchemaMatchesModels(t *testing.T) {
	t.Parallel()
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openTestStore(t, dsn)
		checkVersions(t, s.db)
		want := modelstest.Gorm(t, freshDSN(t, dsn))
		if err := want.AutoMigrate(currentModels()...); err != nil {
			t.Fatal(err)
		}
		got, exp := schemaOf(t, s.db), schemaOf(t, want)
		delete(got, "schema_migrations")
		delete(got, "job_counts") // the database's own, kept by triggers (jobcounts.go)
		// forecasts.started is the database's own too, kept by triggers
		// (forecastsStarted): no struct writes it. Only its type is
		// checked, once.
		started := slices.Index(got["forecasts"], "started bool")
		if started < 0 && slices.Contains(got["forecasts"], "started boolean") {
			started = slices.Index(got["forecasts"], "started boolean")
		}
		if started < 0 {
			t.Errorf("forecasts has no boolean column started: %v", got["forecasts"])
		} else {
			got["forecasts"] = slices.Delete(got["forecasts"], started, started+1)
		}
		if g, w := fmt.Sprint(sortedKeys(got)), fmt.Sprint(sortedKeys(exp)); g != w {
			t.Errorf("tables = %s, want %s", g, w)
		}
		for table, cols := range exp {
			if g, w := fmt.Sprint(got[table]), fmt.Sprint(cols); g != w {
				t.Errorf("columns of %s:\n got %s\nwant %s", table, g, w)
			}
		}
	})
}

// schemaOf returns each table's columns as "name type", sorted.
func schemaOf(t *testing.T, db *gorm.DB) map[string][]string {
	t.Helper()
	tables, err := db.Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]string, len(tables))
	for _, table := range tables {
		types, err := db.Migrator().ColumnTypes(table)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, c := range types {
			cols = append(cols, c.Name()+" "+strings.ToLower(c.DatabaseTypeName()))
		}
		sort.Strings(cols)
		out[table] = cols
	}
	return out
}

func sortedKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestMigrateTwiceAndAtOnce opens one database from several stores at
// once, as replicas starting together do, then again: each step runs
// exactly once. SQLite serves one replica, so it is opened in turn.
func TestMigrateTwiceAndAtOnce(t *testing.T) {
	t.Parallel()
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		if strings.HasPrefix(dsn, "sqlite:") {
			openTestStore(t, dsn).Close()
		}
		var wg sync.WaitGroup
		errs := make([]error, 3)
		if strings.HasPrefix(dsn, "sqlite:") {
			errs = errs[:1]
		}
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := Open(context.Background(), dsn)
				if err == nil {
					s.Close()
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent opens: %v", err)
		}
		s := openTestStore(t, dsn)
		applied, err := migrate(context.Background(), s.db, migrations())
		if err != nil || len(applied) != 0 {
			t.Errorf("migrating an up-to-date database applied %v, %v; want nothing", applied, err)
		}
		checkVersions(t, s.db)
	})
}

// TestMissingStepFails checks that a model column no step creates stops
// the migration with a message naming it.
func TestMissingStepFails(t *testing.T) {
	t.Parallel()
	db := modelstest.Gorm(t, modelstest.SQLiteDSN(t))
	short := migrations()[:1] // the baseline lacks later columns
	_, err := migrate(context.Background(), db, short)
	if err == nil || !strings.Contains(err.Error(), "jobs.cancel_request") || !strings.Contains(err.Error(), "models/migrations.go") {
		t.Errorf("migrate without later steps: err = %v; want one naming jobs.cancel_request", err)
	}
	var n int64
	if err := db.Model(&schemaMigration{}).Count(&n).Error; err == nil && n != 0 {
		t.Errorf("a failed migration left %d recorded steps; want it rolled back", n)
	}
}

// TestMigrationNamesFit: every step's name fits schema_migrations.name
// (128 characters), which PostgreSQL enforces and SQLite does not.
func TestMigrationNamesFit(t *testing.T) {
	t.Parallel()
	for _, m := range migrations() {
		if n := len(m.name); n > 128 {
			t.Errorf("migration %d: name of %d characters, at most 128 fit: %q", m.version, n, m.name)
		}
	}
}
