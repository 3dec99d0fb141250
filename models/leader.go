package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"
)

// schedulerLock is the PostgreSQL advisory lock held by the one replica
// that schedules ("gpuport" + "l" in ASCII).
const schedulerLock int64 = 0x677075706f72746c

// Lease is this process's hold on the right to schedule. With PostgreSQL
// it is a session advisory lock on a connection of its own: the lock
// lasts exactly as long as that connection, so a leader that dies, or
// whose connection does, lets another replica take over.
type Lease struct {
	conn      *sql.Conn // nil with SQLite: one replica, always the leader
	lost      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	err       error // why the lease was lost; set before lost closes
}

// Replicated reports whether several server replicas may share this
// store and take the leader lock in turn (PostgreSQL); with SQLite one
// process serves.
func (s *Store) Replicated() bool { return s.db.Dialector.Name() == "postgres" }

// TryLead tries to become the replica that schedules and returns its
// lease, or nil when another replica holds it. With SQLite, which one
// process at a time serves, it always succeeds. With PostgreSQL the lease
// checks its connection every check (default 1s) and reports on Lost when
// it fails.
func (s *Store) TryLead(ctx context.Context, check time.Duration) (*Lease, error) {
	l := &Lease{lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if s.db.Dialector.Name() != "postgres" {
		close(l.done)
		return l, nil
	}
	if check <= 0 {
		check = time.Second
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return nil, fmt.Errorf("leader lock: %w", err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("leader lock: connect: %w", err)
	}
	// The server then notices within seconds a leader whose machine died
	// without closing its connection, and frees the lock.
	for _, set := range []string{"SET tcp_keepalives_idle = 5", "SET tcp_keepalives_interval = 2", "SET tcp_keepalives_count = 3"} {
		if _, err := conn.ExecContext(ctx, set); err != nil {
			discard(conn)
			return nil, fmt.Errorf("leader lock: %s: %w", set, err)
		}
	}
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", schedulerLock).Scan(&got); err != nil {
		discard(conn)
		return nil, fmt.Errorf("leader lock: %w", err)
	}
	if !got {
		// Back to the pool: it holds no lock.
		conn.Close()
		return nil, nil
	}
	l.conn = conn
	go l.watch(check)
	return l, nil
}

// watch pings the lock's connection until it fails or Release is called.
func (l *Lease) watch(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*every)
		// The session, and so the lock, lives as long as the connection.
		err := l.conn.PingContext(ctx)
		cancel()
		if err != nil {
			l.err = fmt.Errorf("check the lock's connection: %w", err)
			close(l.lost)
			return
		}
	}
}

// Lost is closed when the lease ends by itself: its connection failed.
// The leader must stop scheduling at once, as another replica may take
// over within seconds. It never closes with SQLite.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err says why the lease was lost; nil while it holds.
func (l *Lease) Err() error {
	select {
	case <-l.lost:
		return l.err
	default:
		return nil
	}
}

// Confirm checks, with one round trip on the lock's own session, that the
// lease still holds: the lock lives exactly as long as that session. With
// SQLite it always holds.
func (l *Lease) Confirm(ctx context.Context) error {
	if l.conn == nil {
		return nil
	}
	if err := l.Err(); err != nil {
		return err
	}
	if err := l.conn.PingContext(ctx); err != nil {
		return fmt.Errorf("confirm the leader lock: %w", err)
	}
	return nil
}

// Release gives the lease up: the connection that holds the lock is
// closed, not returned to the pool, so the lock goes with it.
func (l *Lease) Release() {
	l.closeOnce.Do(func() {
		close(l.stop)
		<-l.done
		if l.conn != nil {
			discard(l.conn)
		}
	})
}

// discard closes the connection itself rather than returning it to the
// pool, ending its database session and every lock the session holds.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
