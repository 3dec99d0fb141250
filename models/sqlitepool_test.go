package models

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

func TestReads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query string
		want  bool
	}{
		{"SELECT * FROM jobs", true},
		{"  select 1", true},
		{"(SELECT 1) UNION (SELECT 2)", true},
		{"INSERT INTO jobs (id) VALUES (1) RETURNING id", false},
		{"UPDATE jobs SET state = 'queued'", false},
		{"DELETE FROM jobs", false},
		{"WITH x AS (SELECT 1) DELETE FROM jobs", false}, // not a plain read: takes the turn
		{"PRAGMA wal_checkpoint", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := reads(tc.query); got != tc.want {
			t.Errorf("reads(%q) = %v, want %v", tc.query, got, tc.want)
		}
	}
}

// TestSQLitePoolQueuesWriters: eight goroutines write at once through
// four connections while others read, with a busy timeout of 1 ms. SQLite
// alone would refuse most writers ("database is locked"); the pool's
// queue lets each in its turn, readers beside them.
func TestSQLitePoolQueuesWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	conn, err := sql.Open(sqlite.DriverName, path+"?_pragma=busy_timeout(1)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetMaxOpenConns(4)
	db, err := gorm.Open(&sqlite.Dialector{DriverName: sqlite.DriverName, Conn: newSQLitePool(conn)}, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID int64
		N  int
	}
	if err := db.AutoMigrate(&row{}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*2)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
					if err := tx.Create(&row{N: w*each + i}).Error; err != nil {
						return err
					}
					var n int64
					return tx.Model(&row{}).Count(&n).Error
				})
				if err != nil {
					errs <- err
				}
				if err := db.WithContext(ctx).Exec("UPDATE rows SET n = n + 1 WHERE id = 1").Error; err != nil {
					errs <- err
				}
			}
		})
		wg.Go(func() {
			for range each {
				var rs []row
				if err := db.WithContext(ctx).Find(&rs).Error; err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a write or read failed: %v", err)
	}
	var n int64
	if err := db.Model(&row{}).Count(&n).Error; err != nil || n != writers*each {
		t.Fatalf("%d rows (%v), want %d", n, err, writers*each)
	}
}
