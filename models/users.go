package models

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"
)

// ErrBadCredentials is returned when a name and password do not match.
var ErrBadCredentials = errors.New("wrong user name or password")

// ErrExists is returned when a record with the same unique key exists.
var ErrExists = errors.New("already exists")

// ErrDisabled is returned when the right password is given for an
// account an admin disabled.
var ErrDisabled = errors.New("account disabled")

// ErrInvalid marks input the store refuses: its error says what is wrong.
var ErrInvalid = errors.New("invalid")

// CreateUser stores a new user with a bcrypt hash of password.
func (s *Store) CreateUser(ctx context.Context, name, password string, role Role, team string) (*User, error) {
	if err := CheckName(name); err != nil {
		return nil, fmt.Errorf("create user: name %w: %w", err, ErrInvalid)
	}
	if !role.Valid() {
		return nil, fmt.Errorf("create user %s: unknown role %q", name, role)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.passwordCost)
	if err != nil {
		return nil, fmt.Errorf("create user %s: hash password: %w", name, err)
	}
	u := &User{Name: name, PasswordHash: string(hash), Role: role, Team: team, UnixName: name, Source: SourceLocal}
	if err := s.db.WithContext(ctx).Create(u).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return nil, fmt.Errorf("create user %s: %w", name, ErrExists)
		}
		return nil, fmt.Errorf("create user %s: %w", name, err)
	}
	return u, nil
}

// UserByName returns the user called name.
func (s *Store) UserByName(ctx context.Context, name string) (*User, error) {
	var u User
	if err := s.db.WithContext(ctx).Where("name = ?", name).First(&u).Error; err != nil {
		return nil, notFound(err, "user "+name)
	}
	return &u, nil
}

// UserByID returns the user with id.
func (s *Store) UserByID(ctx context.Context, id int64) (*User, error) {
	var u User
	if err := s.db.WithContext(ctx).First(&u, id).Error; err != nil {
		return nil, notFound(err, fmt.Sprintf("user %d", id))
	}
	return &u, nil
}

// Authenticate returns the user if password is theirs, else ErrBadCredentials.
func (s *Store) Authenticate(ctx context.Context, name, password string) (*User, error) {
	u, err := s.UserByName(ctx, name)
	if errors.Is(err, ErrNotFound) {
		// Spend the same time as a real check so names cannot be probed.
		_ = bcrypt.CompareHashAndPassword(s.dummyHash(), []byte(password))
		return nil, ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil ||
		u.Source != "" && u.Source != SourceLocal { // its password is kept at its source
		return nil, ErrBadCredentials
	}
	if u.Disabled() {
		return nil, fmt.Errorf("log in as %s: %w", name, ErrDisabled)
	}
	return u, nil
}

// Users lists every user by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	var us []User
	if err := s.db.WithContext(ctx).Order("name").Find(&us).Error; err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return us, nil
}

// EnsureTeam creates the team if no team of that name exists.
func (s *Store) EnsureTeam(ctx context.Context, name string, guaranteeGPUs int) (*Team, error) {
	t := Team{Name: name, GuaranteeGPUs: guaranteeGPUs, Weight: 1}
	err := s.db.WithContext(ctx).Where(Team{Name: name}).FirstOrCreate(&t).Error
	if err != nil {
		return nil, fmt.Errorf("ensure team %s: %w", name, err)
	}
	return &t, nil
}

// Teams lists every team by name.
func (s *Store) Teams(ctx context.Context) ([]Team, error) {
	var ts []Team
	if err := s.db.WithContext(ctx).Order("name").Find(&ts).Error; err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return ts, nil
}

// newSecret returns a random token and the hash under which it is stored.
func newSecret() (token, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("random token: %w", err)
	}
	token = hex.EncodeToString(b)
	return token, HashToken(token), nil
}

// HashToken is how session and API tokens are stored: a SHA-256 hex digest.
// Tokens are 256 random bits, so a fast hash is enough.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// CreateSession starts a session for userID and returns its cookie token.
func (s *Store) CreateSession(ctx context.Context, userID int64, now time.Time, ttl time.Duration) (string, error) {
	token, hash, err := newSecret()
	if err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	sess := Session{TokenHash: hash, UserID: userID, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.db.WithContext(ctx).Create(&sess).Error; err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	return token, nil
}

// SessionUser returns the user of an unexpired session token, unless an
// admin disabled the account.
func (s *Store) SessionUser(ctx context.Context, token string, now time.Time) (*User, error) {
	var u User
	err := s.db.WithContext(ctx).
		Joins("JOIN sessions ON sessions.user_id = users.id").
		Where("sessions.token_hash = ? AND sessions.expires_at > ? AND users.disabled_at IS NULL", HashToken(token), now).
		First(&u).Error
	if err != nil {
		return nil, notFound(err, "session")
	}
	return &u, nil
}

// DeleteSession ends a session.
func (s *Store) DeleteSession(ctx context.Context, token string) error {
	err := s.db.WithContext(ctx).Where("token_hash = ?", HashToken(token)).Delete(&Session{}).Error
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// CreateAPIToken issues a bearer token for userID, valid for ttl. The token
// itself is returned once and never stored.
func (s *Store) CreateAPIToken(ctx context.Context, userID int64, name string, now time.Time, ttl time.Duration) (string, error) {
	token, hash, err := newSecret()
	if err != nil {
		return "", fmt.Errorf("create API token: %w", err)
	}
	t := APIToken{TokenHash: hash, UserID: userID, Name: name, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.db.WithContext(ctx).Create(&t).Error; err != nil {
		return "", fmt.Errorf("create API token: %w", err)
	}
	return token, nil
}

// TokenUser returns the user of an unexpired API token, unless an admin
// disabled the account.
func (s *Store) TokenUser(ctx context.Context, token string, now time.Time) (*User, error) {
	var u User
	err := s.db.WithContext(ctx).
		Joins("JOIN api_tokens ON api_tokens.user_id = users.id").
		Where("api_tokens.token_hash = ? AND api_tokens.expires_at > ? AND users.disabled_at IS NULL", HashToken(token), now).
		First(&u).Error
	if err != nil {
		return nil, notFound(err, "API token")
	}
	// Its last use, written at most once per TokenUseResolution so that a
	// busy script does not write on every request.
	err = s.db.WithContext(ctx).Model(&APIToken{}).
		Where("token_hash = ? AND (last_used_at IS NULL OR last_used_at < ?)", HashToken(token), now.Add(-TokenUseResolution)).
		Update("last_used_at", now).Error
	if err != nil {
		return nil, fmt.Errorf("API token: note its use: %w", err)
	}
	return &u, nil
}

// TokenUseResolution is how precisely an API token's last use is kept.
const TokenUseResolution = time.Minute
