package models

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
)

// migration is one numbered step of the schema's history. A released step
// never changes: it works on frozen copies of the structs of its time (or
// on plain SQL), so that editing today's structs cannot change what an
// old step does.
type migration struct {
	version int
	name    string
	up      func(tx *gorm.DB) error
}

// schemaMigration records one applied step in the schema_migrations table.
type schemaMigration struct {
	Version   int       `gorm:"primaryKey;autoIncrement:false"`
	Name      string    `gorm:"size:128;not null"`
	AppliedAt time.Time `gorm:"not null"`
}

func (schemaMigration) TableName() string { return "schema_migrations" }

// migrationLock is the PostgreSQL advisory lock key that serializes the
// migrations of replicas starting at once ("gpuport" + "m" in ASCII).
const migrationLock int64 = 0x677075706f72746d

// currentModels are the structs the store reads and writes today: after
// the migrations, the database must have every column they name.
func currentModels() []any {
	return []any{&User{}, &Team{}, &Session{}, &APIToken{}, &Job{}, &AuditEntry{}, &JobEvent{},
		&JobTemplate{}, &UserCap{}, &TeamSample{}, &GPUHistory{}, &ClusterHistory{}, &CPUProfile{},
		&NodeHold{}, &GPUFault{}, &Run{}, &JoinToken{}, &Machine{}, &StoreProbe{}, &Forecast{},
		&NotificationSettings{}, &Notification{}, &AccountingDay{}, &AccountingClosedDay{}, &UserUsage{}, &serverKey{}, &Reservation{}}
}

// migrate brings the schema up to date with steps, in one transaction, and
// returns the versions it applied. A database made before versioned
// migrations (its tables exist, schema_migrations does not) is taken for
// one at the baseline: step 1 creates only what such a database lacks.
// It then checks that every column of the current structs exists, so a
// struct field without a migration step fails at start, not in a query.
func migrate(ctx context.Context, db *gorm.DB, steps []migration) (applied []int, err error) {
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if tx.Dialector.Name() == "postgres" {
			// Replicas starting together migrate one after the other.
			if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", migrationLock).Error; err != nil {
				return fmt.Errorf("lock for migrations: %w", err)
			}
		}
		if err := tx.Migrator().AutoMigrate(&schemaMigration{}); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var done []int
		if err := tx.Model(&schemaMigration{}).Pluck("version", &done).Error; err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		have := make(map[int]bool, len(done))
		for _, v := range done {
			have[v] = true
		}
		for _, st := range steps {
			if have[st.version] {
				continue
			}
			if err := st.up(tx); err != nil {
				return fmt.Errorf("migration %d (%s): %w", st.version, st.name, err)
			}
			rec := schemaMigration{Version: st.version, Name: st.name, AppliedAt: time.Now().UTC()}
			if err := tx.Create(&rec).Error; err != nil {
				return fmt.Errorf("record migration %d: %w", st.version, err)
			}
			applied = append(applied, st.version)
		}
		return checkColumns(tx, currentModels())
	})
	if err != nil {
		return nil, fmt.Errorf("migrate schema: %w", err)
	}
	return applied, nil
}

// checkColumns reports the columns that models name and the database lacks.
func checkColumns(tx *gorm.DB, models []any) error {
	var missing []string
	for _, m := range models {
		table, cols, err := modelColumns(tx, m)
		if err != nil {
			return err
		}
		have, err := tableColumns(tx, table)
		if err != nil {
			return err
		}
		for _, c := range cols {
			if !have[c] {
				missing = append(missing, table+"."+c)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("columns %s are in the models but no migration creates them: add a step in models/migrations.go",
			strings.Join(missing, ", "))
	}
	return nil
}

// modelColumns returns the table and column names gorm derives from model.
func modelColumns(db *gorm.DB, model any) (string, []string, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return "", nil, fmt.Errorf("parse model %T: %w", model, err)
	}
	cols := append([]string(nil), stmt.Schema.DBNames...)
	sort.Strings(cols)
	return stmt.Schema.Table, cols, nil
}

// tableColumns returns the columns the database has in table.
func tableColumns(db *gorm.DB, table string) (map[string]bool, error) {
	if !db.Migrator().HasTable(table) {
		return map[string]bool{}, nil
	}
	types, err := db.Migrator().ColumnTypes(table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	out := make(map[string]bool, len(types))
	for _, t := range types {
		out[t.Name()] = true
	}
	return out, nil
}

// addColumns adds the named fields of model (a frozen struct naming its
// table) that the table lacks. A database that already has them, made by
// a development build, is left alone.
func addColumns(tx *gorm.DB, model any, fields ...string) error {
	m := tx.Migrator()
	for _, f := range fields {
		if m.HasColumn(model, f) {
			continue
		}
		if err := m.AddColumn(model, f); err != nil {
			return fmt.Errorf("add column %s: %w", f, err)
		}
	}
	return nil
}

// createTables creates the tables of models (frozen structs) that do not
// exist yet, with their indexes.
func createTables(tx *gorm.DB, models ...any) error {
	for _, md := range models {
		if tx.Migrator().HasTable(md) {
			continue
		}
		if err := tx.Migrator().CreateTable(md); err != nil {
			return fmt.Errorf("create table for %T: %w", md, err)
		}
	}
	return nil
}
