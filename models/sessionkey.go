package models

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// SessionKey is the server's secret from which every interactive
// session's URL secret and token are derived (SessionPrefix, JobSession).
// It lives in a file outside the database, so that a copy of the database
// (a backup, a leaked dump, a local user who can read it) opens no
// session: the jobs table holds only a random salt per session. Every
// server of one database must have the same key; Open checks it against
// the fingerprint the database keeps (table server_keys).
type SessionKey [32]byte

// sessionKeyName is the key's name in server_keys.
const sessionKeyName = "session"

// NewSessionKey returns a fresh random key.
func NewSessionKey() (SessionKey, error) {
	var k SessionKey
	if _, err := rand.Read(k[:]); err != nil {
		return k, fmt.Errorf("session key: %w", err)
	}
	return k, nil
}

// LoadSessionKey reads the key file at path: the key in standard base64,
// alone on its line. With create, a missing file is made with a fresh key
// (mode 0600, its folder 0700 if it is made too). The file must be
// readable by its owner only, as ssh asks of a private key: a key others
// can read protects nothing.
func LoadSessionKey(path string, create bool) (SessionKey, error) {
	var k SessionKey
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		return createSessionKey(path)
	}
	if err != nil {
		return k, fmt.Errorf("session key file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return k, fmt.Errorf("session key file: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return k, fmt.Errorf("session key file %s: mode %#o lets others read it: chmod 600 it", path, perm)
	}
	b := make([]byte, 256)
	n, err := f.Read(b)
	if err != nil {
		return k, fmt.Errorf("session key file %s: %w", path, err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b[:n])))
	if err != nil || len(raw) != len(k) {
		return k, fmt.Errorf("session key file %s: want %d random bytes in base64 on one line (openssl rand -base64 32)", path, len(k))
	}
	copy(k[:], raw)
	return k, nil
}

func createSessionKey(path string) (SessionKey, error) {
	k, err := NewSessionKey()
	if err != nil {
		return k, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return k, fmt.Errorf("session key file: %w", err)
	}
	// O_EXCL: of two servers that start at once on one folder, the second
	// reads the first's key instead of replacing it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadSessionKey(path, false)
	}
	if err != nil {
		return k, fmt.Errorf("session key file: %w", err)
	}
	_, err = f.WriteString(base64.StdEncoding.EncodeToString(k[:]) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return k, fmt.Errorf("session key file %s: %w", path, err)
	}
	return k, nil
}

// Fingerprint names the key without revealing it: the database keeps it
// to tell a server that starts with another key.
func (k *SessionKey) Fingerprint() string {
	return hex.EncodeToString(k.derive("fingerprint")[:12])
}

// derive returns HMAC-SHA256 under k of the parts, each ended by a zero
// byte so that no two lists of parts read the same.
func (k *SessionKey) derive(parts ...string) []byte {
	m := hmac.New(sha256.New, k[:])
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// serverKey is a row of server_keys: the fingerprint of a key every
// server of the database must share.
type serverKey struct {
	Name        string `gorm:"primaryKey;size:32"`
	Fingerprint string `gorm:"size:64;not null"`
}

func (serverKey) TableName() string { return "server_keys" }

// ErrSessionKeyMismatch: the server's session key is not the one the
// database's sessions were made with.
var ErrSessionKeyMismatch = errors.New("session key differs from the one this database's sessions were made with")

// checkSessionKey records the key's fingerprint in a new database and
// compares it in one that has one; replace records this key instead
// (sessions open now stop working: their secrets were derived from the
// other key).
func (s *Store) checkSessionKey(ctx context.Context, replace bool) error {
	fp := s.sessionKey.Fingerprint()
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := serverKey{Name: sessionKeyName, Fingerprint: fp}
		if replace {
			return tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error
		}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
			return fmt.Errorf("session key: %w", err)
		}
		var have serverKey
		if err := tx.First(&have, "name = ?", sessionKeyName).Error; err != nil {
			return fmt.Errorf("session key: %w", err)
		}
		if have.Fingerprint != fp {
			return fmt.Errorf("%w (database %s, this server %s): give every server of the database the same key file, or replace the key (sessions open now must be restarted)",
				ErrSessionKeyMismatch, have.Fingerprint, fp)
		}
		return nil
	})
}
