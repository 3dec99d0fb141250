package models

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestLeaseOnSQLiteAlwaysLeads(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, migrated.SQLiteDSN(t))
	l, err := s.TryLead(context.Background(), 10*time.Millisecond)
	if err != nil || l == nil {
		t.Fatalf("TryLead on SQLite = %v, %v; want a lease", l, err)
	}
	l.Release()
	select {
	case <-l.Lost():
		t.Error("a released SQLite lease reports itself lost")
	default:
	}
}

// TestLeaseOnPostgres checks the leader lock between two stores, as two
// replicas hold it: one at a time; lost with its connection; free again
// once released.
func TestLeaseOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := migrated.PostgresDSN(t)
	a, b := openTestStore(t, dsn), openTestStore(t, dsn)
	const check = 50 * time.Millisecond

	la, err := a.TryLead(ctx, check)
	if err != nil || la == nil {
		t.Fatalf("first TryLead = %v, %v; want the lease", la, err)
	}
	if lb, err := b.TryLead(ctx, check); err != nil || lb != nil {
		t.Fatalf("second TryLead while held = %v, %v; want none", lb, err)
	}

	// The lock's session dies (a crash, a network cut, an operator): the
	// holder learns it within a few checks, and the other replica leads.
	var pid int
	key := uint64(schedulerLock)
	// pg_locks lists every database's locks: another test's server
	// holding the same lock in its own database (integration's replicas)
	// is not this one's, and ending its session failed both tests.
	err = b.db.Raw(`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid = ? AND objid = ?
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		uint32(key>>32), uint32(key&0xffffffff)).Scan(&pid).Error
	if err != nil || pid == 0 {
		t.Fatalf("find the lock's session: pid %d, %v", pid, err)
	}
	if err := b.db.Exec("SELECT pg_terminate_backend(?)", pid).Error; err != nil {
		t.Fatal(err)
	}
	select {
	case <-la.Lost():
		if la.Err() == nil || !strings.Contains(la.Err().Error(), "lock's connection") {
			t.Errorf("lost lease's error = %v", la.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the holder did not notice its lock's session ended")
	}
	la.Release()
	lb, err := b.TryLead(ctx, check)
	if err != nil || lb == nil {
		t.Fatalf("TryLead after the holder's session ended = %v, %v; want the lease", lb, err)
	}

	// Released, the lock is free at once: its connection is closed, not
	// pooled with the lock still held.
	lb.Release()
	la2, err := a.TryLead(ctx, check)
	if err != nil || la2 == nil {
		t.Fatalf("TryLead after a release = %v, %v; want the lease", la2, err)
	}
	la2.Release()
}
