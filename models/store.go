package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/glebarez/sqlite"
	"golang.org/x/crypto/bcrypt"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// ErrNotFound is returned when a record asked for by key does not exist.
var ErrNotFound = errors.New("not found")

// Store reads and writes gpuportal's records. It is safe for concurrent use.
type Store struct {
	db *gorm.DB
	// dsn is the database's DSN, its password removed, and opts the
	// options it was opened with, for Ready.
	dsn  string
	opts Options
	// ready: Ready succeeded (readyMu held to read or set it).
	readyMu sync.Mutex
	ready   bool
	// submits gathers concurrent CreateJob calls into one transaction on
	// SQLite, whose one writer at a time makes each commit count;
	// PostgreSQL commits them side by side.
	submits groupCommit
	grouped bool
	// writes counts rows written by kind, for /metrics (metrics.go).
	writes writeCounter
	// passwordCost is the bcrypt cost of the password hashes it makes.
	passwordCost int
	// sessionKey derives sessions' secrets (sessionkey.go).
	sessionKey *SessionKey
	// dummyHash is compared against when a user does not exist, at
	// passwordCost, so that the answer takes as long as a real check.
	dummyHash func() []byte
	// queues keeps the unfinished jobs' QueueRows between reads
	// (queueview.go).
	queues queueView
	// jcts keeps the JCT window's completions between reads (jctview.go).
	jcts jctView
	// queueJobsSQL is QueueJobsByID's query on this database
	// (queueJobsQuery), made once.
	queueJobsOnce sync.Once
	queueJobsSQL  string
	queueJobsErr  error
	// jobCountsCompactAt overrides jobCountsCompactAt in tests; 0: the
	// constant (jobcounts.go).
	jobCountsCompactAt int
}

// Options tune the connection to the database.
type Options struct {
	// MaxConns bounds the open connections; 0 is the database's default:
	// DefaultMaxConns on PostgreSQL, 1 on SQLite. SQLite runs in WAL mode
	// and its transactions take the write lock when they begin: with more
	// than one connection, readers proceed beside the one writer, but
	// writers waiting for the lock poll for it (busy timeout 10 s) rather
	// than queue in order, so a long write starves the others; with one,
	// the pool queues them.
	MaxConns int
	// PasswordCost is the bcrypt cost of the password hashes the store
	// makes; 0 is bcrypt.DefaultCost. Hashes already stored keep theirs.
	// Tests lower it to bcrypt.MinCost: under the race detector a hash at
	// the default cost takes seconds.
	PasswordCost int
	// SessionKey is the key sessions' secrets are derived from
	// (sessionkey.go); the store checks it against the database's and
	// takes the secrets an earlier version stored in clear out of it. Nil:
	// a random key of its own, for tools that open no session.
	SessionKey *SessionKey
	// ReplaceSessionKey makes SessionKey the database's key though it
	// knew another: sessions open now stop working.
	ReplaceSessionKey bool
}

// DefaultMaxConns is the default bound on PostgreSQL connections.
const DefaultMaxConns = 16

// DefaultSQLiteConns is the default bound on SQLite connections. In WAL
// mode readers do not wait for the writer nor it for them; writes still
// go one at a time (each write transaction begins IMMEDIATE, and waits
// its turn up to the busy timeout). With one connection a submission
// waited behind the engine's reads: 106-117 submissions a second at
// concurrency 1 against 186-258 with four (TestSQLiteSubmissionsSurviveKill,
// this machine under load).
const DefaultSQLiteConns = 4

// Open connects to the database named by dsn with the default options
// and brings its schema up to date. dsn is "sqlite:PATH" (the folder is
// created) or a "postgres://" URL.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, opts Options) (*Store, error) {
	s, err := OpenLater(dsn, opts)
	if err != nil {
		return nil, err
	}
	if err := s.Ready(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OpenLater is OpenWith for a database that may not answer yet (a server
// started during a database outage, server/serve.go): it checks the DSN
// and asks nothing of the database. Ready, called until it succeeds,
// connects, brings the schema up to date and checks the session key;
// until then the store's reads and writes fail as the database does.
func OpenLater(dsn string, opts Options) (*Store, error) {
	switch {
	case opts.PasswordCost == 0:
		opts.PasswordCost = bcrypt.DefaultCost
	case opts.PasswordCost < bcrypt.MinCost || opts.PasswordCost > bcrypt.MaxCost:
		return nil, fmt.Errorf("open database: password cost %d: must be between %d and %d", opts.PasswordCost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	var dialector gorm.Dialector
	sqliteDB := false
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return nil, errors.New("open database: sqlite DSN has no path")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("open database: create folder: %w", err)
		}
		if err := ownerOnly(path); err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
		conn, err := sql.Open(sqlite.DriverName, path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate")
		if err != nil {
			return nil, fmt.Errorf("open database %s: %w", RedactDSN(dsn), err)
		}
		dialector = &sqlite.Dialector{DriverName: sqlite.DriverName, Conn: newSQLitePool(conn)}
		sqliteDB = true
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		dialector = postgres.Open(dsn)
	default:
		return nil, fmt.Errorf("open database: DSN must start with sqlite: or postgres://, got %q", RedactDSN(dsn))
	}
	db, err := gorm.Open(dialector, &gorm.Config{Logger: logger.Discard, TranslateError: true, DisableAutomaticPing: true})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", RedactDSN(dsn), err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
		if sqliteDB {
			opts.MaxConns = DefaultSQLiteConns
		}
	}
	sqlDB.SetMaxOpenConns(opts.MaxConns)
	sqlDB.SetMaxIdleConns(opts.MaxConns)
	cost := opts.PasswordCost
	return &Store{db: db, dsn: RedactDSN(dsn), opts: opts, grouped: sqliteDB, passwordCost: cost, dummyHash: sync.OnceValue(func() []byte {
		h, _ := bcrypt.GenerateFromPassword([]byte("not a password"), cost)
		return h
	})}, nil
}

// Ready connects to the database, brings its schema up to date and checks
// the session key (Options.SessionKey), once: after it has succeeded it
// does nothing. A database that does not answer fails it with an error
// Unavailable says so of.
func (s *Store) Ready(ctx context.Context) error {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if s.ready {
		return nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("open database %s: %w", s.dsn, err)
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	if s.sessionKey = s.opts.SessionKey; s.sessionKey == nil {
		k, err := NewSessionKey()
		if err != nil {
			return err
		}
		s.sessionKey = &k
		s.ready = true
		return nil
	}
	if err := s.checkSessionKey(ctx, s.opts.ReplaceSessionKey); err != nil {
		return err
	}
	if err := s.sealLegacySessions(ctx); err != nil {
		return err
	}
	s.ready = true
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	_, err := migrate(ctx, s.db, migrations())
	return err
}

// rowsPerInsert is how many rows one INSERT of many rows carries. The
// SQLite driver binds a statement's parameters in time that grows with
// the square of their number: 4,000 GPUs' minute of history took 215 ms
// in batches of 500 rows, 67 ms in batches of 50 (73 at 20, 78 at 100).
// PostgreSQL takes them in linear time and saves round trips with more
// (220 ms at 500, 247 at 50).
func (s *Store) rowsPerInsert() int {
	if s.grouped {
		return 50
	}
	return 500
}

// Close releases the database connections.
func (s *Store) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("close database: %w", err)
	}
	return sqlDB.Close()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return sqlDB.PingContext(ctx)
}

// RedactDSN hides the password in a database URL so it can be logged.
func RedactDSN(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return dsn
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return dsn
	}
	userinfo := rest[:at]
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":xxxxx" + rest[at:]
	}
	return dsn
}

func notFound(err error, what string) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// ownerOnly makes the SQLite database at path, and its write-ahead log
// and shared memory where they exist, readable by this account alone
// (0600): it holds password hashes and sessions' tokens. A new database
// is made so before SQLite opens it, which gives its -wal and -shm files
// the database's mode.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("make %s readable by its owner only: %w", p, err)
		}
	}
	return nil
}
