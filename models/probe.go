package models

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// StoreProbe is the row CheckWrite writes and deletes.
type StoreProbe struct {
	ID      int64     `gorm:"primaryKey"`
	At      time.Time `gorm:"not null"`
	Payload string    `gorm:"type:text;not null"`
}

// probeBytes is the size of a probe's payload: a few pages, as much as a
// job or a session with its history takes, so that a store that cannot
// grow fails the probe as it would fail them.
const probeBytes = 8 << 10

// CheckWrite reports whether the store can save now: it commits a row of
// a few pages and deletes it again. The error says why it cannot;
// Unavailable(err) tells a full disk or a lost database from other
// failures.
func (s *Store) CheckWrite(ctx context.Context, now time.Time) error {
	b := make([]byte, probeBytes/2)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("probe the store: %w", err)
	}
	p := StoreProbe{At: now, Payload: hex.EncodeToString(b)} // random: no page compresses it away
	db := s.db.WithContext(ctx)
	if err := db.Create(&p).Error; err != nil {
		return fmt.Errorf("probe the store: write: %w", err)
	}
	if err := db.Delete(&p).Error; err != nil {
		return fmt.Errorf("probe the store: delete the probe: %w", err)
	}
	return nil
}

// ErrUnavailable marks errors of a store that cannot save right now: its
// disk is full or read-only, or its database cannot be reached. Nothing
// the user did is wrong; trying again later may work.
var ErrUnavailable = errors.New("the store cannot save right now")

// Unavailable reports whether err comes from a store that cannot save
// right now (ErrUnavailable), rather than from a bug or bad input.
func Unavailable(err error) bool {
	return Cause(err) != ""
}

// Cause names, in a few words, why err says the store cannot save right
// now ("disk full", "database unreachable", ...), or "" when it does not.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, ErrUnavailable) {
		return "unavailable"
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "disk full"
	case errors.Is(err, syscall.EROFS):
		return "disk read-only"
	case errors.Is(err, syscall.EIO):
		return "disk I/O error"
	}
	var coded interface{ Code() int } // SQLite's errors (modernc, glebarez)
	if errors.As(err, &coded) {
		// Primary result codes: the low byte of extended ones.
		switch coded.Code() & 0xff {
		case 13: // SQLITE_FULL
			return "disk full"
		case 8: // SQLITE_READONLY
			return "disk read-only"
		case 10: // SQLITE_IOERR
			return "disk I/O error"
		case 14: // SQLITE_CANTOPEN
			return "database file unreachable"
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100": // disk_full
			return "disk full"
		case strings.HasPrefix(pe.Code, "53"): // insufficient resources
			return "database out of resources"
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"): // connection, shutdown
			return "database unreachable"
		case pe.Code == "25006": // read_only_sql_transaction
			return "database read-only"
		}
		return ""
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	// A connection the database closed mid-exchange (it stopped) ends
	// with an unexpected EOF.
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "database unreachable"
	}
	if strings.Contains(err.Error(), "database or disk is full") || strings.Contains(err.Error(), "no space left on device") {
		return "disk full" // a driver that dropped the code
	}
	return ""
}
