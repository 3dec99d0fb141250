package models

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

// sqlitePool is the SQLite connection pool as gorm sees it: reads run on
// any connection at once (WAL mode), and writes one at a time, queued
// here in arrival order. SQLite itself lets one writer in and has the
// others poll for the lock (the busy timeout), sleeping up to 100 ms
// between tries, so that, without this queue, a submission could wait
// behind a burst of the engine's writes far longer than their length, or
// past the timeout. A write is a transaction (each begins IMMEDIATE, see
// the DSN) or a statement outside one that is not a SELECT; the turn is
// held until the transaction ends or the statement is done.
type sqlitePool struct {
	db   *sql.DB
	turn chan struct{} // holds a token while a write runs
}

func newSQLitePool(db *sql.DB) *sqlitePool {
	return &sqlitePool{db: db, turn: make(chan struct{}, 1)}
}

// take waits for the write turn, or for ctx to end.
func (p *sqlitePool) take(ctx context.Context) error {
	select {
	case p.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the SQLite write lock: %w", ctx.Err())
	}
}

func (p *sqlitePool) give() { <-p.turn }

// reads tells whether query only reads: it begins with SELECT.
func reads(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	return len(q) >= 6 && strings.EqualFold(q[:6], "SELECT")
}

// GetDBConn gives gorm's DB() the pool.
func (p *sqlitePool) GetDBConn() (*sql.DB, error) { return p.db, nil }

// PrepareContext prepares on the pool; gorm prepares nothing unless told
// to (gorm.Config.PrepareStmt), and the store does not.
func (p *sqlitePool) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.db.PrepareContext(ctx, query)
}

func (p *sqlitePool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if reads(query) {
		return p.db.ExecContext(ctx, query, args...)
	}
	if err := p.take(ctx); err != nil {
		return nil, err
	}
	defer p.give()
	return p.db.ExecContext(ctx, query, args...)
}

// QueryContext and QueryRowContext take the turn for a write that returns
// rows (INSERT ... RETURNING outside a transaction; gorm wraps its own
// writes in one) while SQLite makes its changes, which it does in the
// statement's first step; its lock is released when the rows are closed,
// and a writer that comes meanwhile polls for it, as without the queue.
func (p *sqlitePool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if reads(query) {
		return p.db.QueryContext(ctx, query, args...)
	}
	if err := p.take(ctx); err != nil {
		return nil, err
	}
	defer p.give()
	return p.db.QueryContext(ctx, query, args...)
}

func (p *sqlitePool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if !reads(query) && p.take(ctx) == nil {
		defer p.give()
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

// BeginTx begins a transaction in the write turn.
func (p *sqlitePool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	if err := p.take(ctx); err != nil {
		return nil, err
	}
	tx, err := p.db.BeginTx(ctx, opts)
	if err != nil {
		p.give()
		return nil, err
	}
	return &sqliteTx{tx: tx, pool: p}, nil
}

// sqliteTx is a transaction holding the write turn until it ends.
type sqliteTx struct {
	tx   *sql.Tx
	pool *sqlitePool
	done bool
}

func (t *sqliteTx) end(err error) error {
	if !t.done {
		t.done = true
		t.pool.give()
	}
	return err
}

func (t *sqliteTx) Commit() error   { return t.end(t.tx.Commit()) }
func (t *sqliteTx) Rollback() error { return t.end(t.tx.Rollback()) }

func (t *sqliteTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, query)
}
func (t *sqliteTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}
func (t *sqliteTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, query, args...)
}
func (t *sqliteTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, query, args...)
}
func (t *sqliteTx) StmtContext(ctx context.Context, stmt *sql.Stmt) *sql.Stmt {
	return t.tx.StmtContext(ctx, stmt)
}
