package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
)

// SetPassword replaces a user's password and ends their sessions and API
// tokens: whoever knew the old password may have made either.
func (s *Store) SetPassword(ctx context.Context, name, password string) error {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.passwordCost)
	if err != nil {
		return fmt.Errorf("set password of %s: %w", name, err)
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		u, err := userByName(tx, name)
		if err != nil {
			return err
		}
		if u.Source != "" && u.Source != SourceLocal {
			return fmt.Errorf("set password of %s: the account signs in with %s, which keeps its password: %w",
				name, sourceWords(u.Source), ErrInvalid)
		}
		if err := tx.Model(u).Update("password_hash", string(hash)).Error; err != nil {
			return fmt.Errorf("set password of %s: %w", name, err)
		}
		return endCredentials(tx, u)
	})
}

// endCredentials deletes u's sessions and API tokens.
func endCredentials(tx *gorm.DB, u *User) error {
	if err := tx.Where("user_id = ?", u.ID).Delete(&Session{}).Error; err != nil {
		return fmt.Errorf("end sessions of %s: %w", u.Name, err)
	}
	if err := tx.Where("user_id = ?", u.ID).Delete(&APIToken{}).Error; err != nil {
		return fmt.Errorf("revoke API tokens of %s: %w", u.Name, err)
	}
	return nil
}

// SetRole changes a user's role and team. A lead or researcher needs a team.
func (s *Store) SetRole(ctx context.Context, name string, role Role, team string) error {
	if !role.Valid() {
		return fmt.Errorf("set role of %s: unknown role %q", name, role)
	}
	if role != RoleAdmin && team == "" {
		return fmt.Errorf("set role of %s: a %s needs a team", name, role)
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		u, err := userByName(tx, name)
		if err != nil {
			return err
		}
		if team != "" {
			if err := tx.Where("name = ?", team).First(&Team{}).Error; err != nil {
				return notFound(err, "team "+team)
			}
		}
		err = tx.Model(u).Updates(map[string]any{"role": role, "team": team}).Error
		if err != nil {
			return fmt.Errorf("set role of %s: %w", name, err)
		}
		return nil
	})
}

func userByName(tx *gorm.DB, name string) (*User, error) {
	var u User
	if err := tx.Where("name = ?", name).First(&u).Error; err != nil {
		return nil, notFound(err, "user "+name)
	}
	return &u, nil
}

// CreateTeam adds a team with a guarantee of guaranteeGPUs.
func (s *Store) CreateTeam(ctx context.Context, name string, guaranteeGPUs int) (*Team, error) {
	if err := CheckName(name); err != nil {
		return nil, fmt.Errorf("create team: name %w: %w", err, ErrInvalid)
	}
	if guaranteeGPUs < 0 {
		return nil, fmt.Errorf("create team %s: guarantee must not be negative", name)
	}
	t := &Team{Name: name, GuaranteeGPUs: guaranteeGPUs, Weight: 1}
	if err := s.db.WithContext(ctx).Create(t).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return nil, fmt.Errorf("create team %s: %w", name, ErrExists)
		}
		return nil, fmt.Errorf("create team %s: %w", name, err)
	}
	return t, nil
}

// APITokens lists a user's unexpired tokens, newest first. Their secrets
// are not kept, so only names and dates are shown.
func (s *Store) APITokens(ctx context.Context, userID int64, now time.Time) ([]APIToken, error) {
	var ts []APIToken
	err := s.db.WithContext(ctx).Where("user_id = ? AND expires_at > ?", userID, now).Order("id DESC").Find(&ts).Error
	if err != nil {
		return nil, fmt.Errorf("list API tokens: %w", err)
	}
	return ts, nil
}

// RevokeAPIToken deletes token id of userID.
func (s *Store) RevokeAPIToken(ctx context.Context, userID, id int64) error {
	res := s.db.WithContext(ctx).Where("id = ? AND user_id = ?", id, userID).Delete(&APIToken{})
	if res.Error != nil {
		return fmt.Errorf("revoke API token %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("API token %d: %w", id, ErrNotFound)
	}
	return nil
}

// RevokeAPITokenByHash deletes userID's token whose hash is hash: a token
// revoking itself (gpuportal logout).
func (s *Store) RevokeAPITokenByHash(ctx context.Context, userID int64, hash string) error {
	res := s.db.WithContext(ctx).Where("token_hash = ? AND user_id = ?", hash, userID).Delete(&APIToken{})
	if res.Error != nil {
		return fmt.Errorf("revoke API token: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("API token: %w", ErrNotFound)
	}
	return nil
}
