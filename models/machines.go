package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Machine identity (docs/agents.md, "Joining machines"). An agent joins
// with a join token, which an admin creates; the server then gives each
// machine the agent registers a credential of its own, which the agent
// keeps in its work folder and presents from then on. A machine is its
// credential, not its name: a second agent that names a registered
// machine without its credential is refused.

// JoinToken lets agents register new machines. Only its hash is stored.
type JoinToken struct {
	ID        int64  `gorm:"primaryKey"`
	Name      string `gorm:"size:128;not null"`
	TokenHash string `gorm:"uniqueIndex;size:64;not null"`
	CreatedBy string `gorm:"size:64;not null"`
	CreatedAt time.Time
	ExpiresAt *time.Time
	RevokedAt *time.Time
	Uses      int `gorm:"not null;default:0"`
}

// Active reports whether the token may register machines at now.
func (t *JoinToken) Active(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}

// Machine is a machine an agent registered. JoinedWith is the join token
// it came with, 0 for the server's own --agent-token.
type Machine struct {
	ID             int64  `gorm:"primaryKey"`
	Name           string `gorm:"uniqueIndex;size:64;not null"`
	CredentialHash string `gorm:"size:64;not null"`
	JoinedWith     int64  `gorm:"not null;default:0"`
	CreatedAt      time.Time
	LastSeenAt     time.Time
}

// ErrWrongCredential is returned for a machine presented with a
// credential that is not its own.
var ErrWrongCredential = errors.New("the machine's credential does not match")

// CreateJoinToken makes a join token named name, valid for ttl (0: until
// revoked), and returns it: the token itself is shown once, never stored.
func (s *Store) CreateJoinToken(ctx context.Context, name, by string, now time.Time, ttl time.Duration) (string, *JoinToken, error) {
	if name == "" || len(name) > 128 {
		return "", nil, errors.New("join token name: want 1 to 128 characters")
	}
	token, hash, err := newSecret()
	if err != nil {
		return "", nil, fmt.Errorf("create join token: %w", err)
	}
	t := &JoinToken{Name: name, TokenHash: hash, CreatedBy: by, CreatedAt: now}
	if ttl > 0 {
		exp := now.Add(ttl)
		t.ExpiresAt = &exp
	}
	if err := s.db.WithContext(ctx).Create(t).Error; err != nil {
		return "", nil, fmt.Errorf("create join token: %w", err)
	}
	return "gpj_" + token, t, nil
}

// JoinTokens lists the join tokens, newest first.
func (s *Store) JoinTokens(ctx context.Context) ([]JoinToken, error) {
	var ts []JoinToken
	if err := s.db.WithContext(ctx).Order("id DESC").Find(&ts).Error; err != nil {
		return nil, fmt.Errorf("list join tokens: %w", err)
	}
	return ts, nil
}

// RevokeJoinToken ends a join token; machines that joined with it keep
// their credentials.
func (s *Store) RevokeJoinToken(ctx context.Context, id int64, now time.Time) error {
	res := s.db.WithContext(ctx).Model(&JoinToken{}).Where("id = ? AND revoked_at IS NULL", id).Update("revoked_at", now)
	if res.Error != nil {
		return fmt.Errorf("revoke join token %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("join token %d: %w", id, ErrNotFound)
	}
	return nil
}

// JoinTokenFor returns the active join token token is, or ErrNotFound.
func (s *Store) JoinTokenFor(ctx context.Context, token string, now time.Time) (*JoinToken, error) {
	raw, ok := cutJoinPrefix(token)
	if !ok {
		return nil, fmt.Errorf("join token: %w", ErrNotFound)
	}
	var t JoinToken
	if err := s.db.WithContext(ctx).Where("token_hash = ?", HashToken(raw)).First(&t).Error; err != nil {
		return nil, notFound(err, "join token")
	}
	if !t.Active(now) {
		return nil, fmt.Errorf("join token %q is revoked or expired: %w", t.Name, ErrNotFound)
	}
	return &t, nil
}

func cutJoinPrefix(token string) (string, bool) {
	if len(token) > 4 && token[:4] == "gpj_" {
		return token[4:], true
	}
	return "", false
}

// RegisterMachine records a new machine that joined with join token
// joinedWith (0: the server's --agent-token) and returns its credential,
// shown once. A name already registered is ErrExists.
func (s *Store) RegisterMachine(ctx context.Context, name string, joinedWith int64, now time.Time) (string, error) {
	cred, hash, err := newSecret()
	if err != nil {
		return "", fmt.Errorf("register machine %s: %w", name, err)
	}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&Machine{}).Where("name = ?", name).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("machine %s: %w", name, ErrExists)
		}
		if err := tx.Create(&Machine{Name: name, CredentialHash: hash, JoinedWith: joinedWith, CreatedAt: now, LastSeenAt: now}).Error; err != nil {
			return err
		}
		if joinedWith > 0 {
			return tx.Model(&JoinToken{}).Where("id = ?", joinedWith).Update("uses", gorm.Expr("uses + 1")).Error
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("register machine %s: %w", name, err)
	}
	return "gpm_" + cred, nil
}

// CheckMachine reports whether name is registered (ErrNotFound if not)
// and credential is its own (ErrWrongCredential if not), and notes that
// it was seen at now.
func (s *Store) CheckMachine(ctx context.Context, name, credential string, now time.Time) error {
	var m Machine
	if err := s.db.WithContext(ctx).Where("name = ?", name).First(&m).Error; err != nil {
		return notFound(err, "machine "+name)
	}
	raw, ok := cutMachinePrefix(credential)
	if !ok || HashToken(raw) != m.CredentialHash {
		return fmt.Errorf("machine %s: %w", name, ErrWrongCredential)
	}
	if err := s.db.WithContext(ctx).Model(&m).Update("last_seen_at", now).Error; err != nil {
		return fmt.Errorf("machine %s: %w", name, err)
	}
	return nil
}

// MachineCredential reports whether credential belongs to any machine.
func (s *Store) MachineCredential(ctx context.Context, credential string) (bool, error) {
	raw, ok := cutMachinePrefix(credential)
	if !ok {
		return false, nil
	}
	var n int64
	if err := s.db.WithContext(ctx).Model(&Machine{}).Where("credential_hash = ?", HashToken(raw)).Count(&n).Error; err != nil {
		return false, fmt.Errorf("machine credential: %w", err)
	}
	return n > 0, nil
}

func cutMachinePrefix(c string) (string, bool) {
	if len(c) > 4 && c[:4] == "gpm_" {
		return c[4:], true
	}
	return "", false
}

// Machines lists the registered machines, by name.
func (s *Store) Machines(ctx context.Context) ([]Machine, error) {
	var ms []Machine
	if err := s.db.WithContext(ctx).Order("name").Find(&ms).Error; err != nil {
		return nil, fmt.Errorf("list machines: %w", err)
	}
	return ms, nil
}

// RemoveMachine forgets a machine: its credential stops working, and its
// name may be registered again.
func (s *Store) RemoveMachine(ctx context.Context, name string) error {
	res := s.db.WithContext(ctx).Where("name = ?", name).Delete(&Machine{})
	if res.Error != nil {
		return fmt.Errorf("remove machine %s: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("machine %s: %w", name, ErrNotFound)
	}
	return nil
}
