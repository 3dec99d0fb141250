package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// Credentials: who a session cookie or an API token is, a password
// checked, a session begun and ended, and each user's own API tokens,
// made, listed and revoked by their owner. The secrets themselves travel
// over HTTP (package web); the store keeps only their hashes.

// The refusals of a sign-in, for errors.Is: a wrong name or password,
// and an account an admin disabled.
var (
	ErrBadCredentials = models.ErrBadCredentials
	ErrDisabled       = models.ErrDisabled
)

// Bounds of an API token a user makes on their tokens page.
const (
	MaxTokenName = 128
	MaxTokenDays = 365
)

// PeopleStore is what the actions on people read and write: their
// credentials, notifications and accounting, their teams' pages, the
// accounts of a directory, the idle jobs reclaimed from them.
type PeopleStore interface {
	CredentialStore
	IdentityStore
	NotificationStore
	AccountingStore
	OverviewStore
	TeamPageStore
	ReclaimStore
}

// CredentialStore is what the credentials read and write.
type CredentialStore interface {
	Authenticate(ctx context.Context, name, password string) (*models.User, error)
	CreateSession(ctx context.Context, userID int64, now time.Time, ttl time.Duration) (string, error)
	SessionUser(ctx context.Context, token string, now time.Time) (*models.User, error)
	DeleteSession(ctx context.Context, token string) error
	CreateAPIToken(ctx context.Context, userID int64, name string, now time.Time, ttl time.Duration) (string, error)
	TokenUser(ctx context.Context, token string, now time.Time) (*models.User, error)
	APITokens(ctx context.Context, userID int64, now time.Time) ([]models.APIToken, error)
	RevokeAPIToken(ctx context.Context, userID, id int64) error
	RevokeAPITokenByHash(ctx context.Context, userID int64, hash string) error
}

// HashToken is how a session or API token is known once checked: the
// digest the store keeps, never the secret.
func HashToken(token string) string { return models.HashToken(token) }

// noCredential is the answer for a session or token that is unknown,
// expired, or of a disabled account.
func noCredential(err error, what string) error {
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: "invalid or expired " + what, Err: err}
	}
	return stored(err)
}

// SessionUser is the user of the session token, while it lasts and the
// account is enabled; a NotFound *Error otherwise.
func (s *App) SessionUser(ctx context.Context, token string) (*User, error) {
	u, err := s.cfg.Store.SessionUser(ctx, token, s.cfg.Now())
	if err != nil {
		return nil, noCredential(err, "session")
	}
	return userView(u), nil
}

// TokenUser is the user of the API token, while it lasts and the
// account is enabled; a NotFound *Error otherwise.
func (s *App) TokenUser(ctx context.Context, token string) (*User, error) {
	u, err := s.cfg.Store.TokenUser(ctx, token, s.cfg.Now())
	if err != nil {
		return nil, noCredential(err, "token")
	}
	return userView(u), nil
}

// DevTokenUser is who the development token acts as: the demo admin,
// while it is an admin and enabled; a NotFound *Error otherwise.
func (s *App) DevTokenUser(ctx context.Context) (*User, error) {
	u, err := s.cfg.Store.UserByName(ctx, "admin")
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return nil, stored(err)
	}
	if err != nil || u.Role != models.RoleAdmin || u.Disabled() {
		return nil, &Error{Kind: NotFound, Msg: "development token: no enabled admin user named admin", Err: err}
	}
	return userView(u), nil
}

// StartSession begins a session of u for ttl and returns its token.
func (s *App) StartSession(ctx context.Context, u *User, ttl time.Duration) (string, error) {
	token, err := s.cfg.Store.CreateSession(ctx, u.ID, s.cfg.Now(), ttl)
	return token, stored(err)
}

// EndSession ends the session of token; its live connections end.
func (s *App) EndSession(ctx context.Context, token string) error {
	if err := s.cfg.Store.DeleteSession(ctx, token); err != nil {
		return stored(err)
	}
	s.cfg.AccessChanged()
	return nil
}

// CreateToken issues an API token named name to the actor, for ttl (a
// whole number of days from 1 to MaxTokenDays, or less), and returns its
// secret, shown once.
func (s *App) CreateToken(ctx context.Context, a Actor, name string, ttl time.Duration) (api.Token, error) {
	if err := CheckTokenName(name); err != nil {
		return api.Token{}, err
	}
	if ttl <= 0 || ttl > MaxTokenDays*24*time.Hour {
		return api.Token{}, invalid("days", "days: must be from 1 to %d", MaxTokenDays)
	}
	now := s.cfg.Now()
	token, err := s.cfg.Store.CreateAPIToken(ctx, a.User.ID, name, now, ttl)
	if err != nil {
		return api.Token{}, stored(err)
	}
	if err := s.audit(ctx, a, "token.create", a.User.Name, name); err != nil {
		return api.Token{}, err
	}
	return api.Token{Token: token, Name: name, ExpiresAt: now.Add(ttl)}, nil
}

// CheckTokenName says what is wrong with the name of a new API token,
// naming the field.
func CheckTokenName(name string) error {
	if name == "" || len(name) > MaxTokenName || strings.TrimSpace(name) != name {
		return invalid("name", "name: is required: 1 to %d characters, not beginning or ending with spaces", MaxTokenName)
	}
	return nil
}

// OwnTokens lists the actor's own unexpired API tokens, newest first.
func (s *App) OwnTokens(ctx context.Context, a Actor) ([]api.APIToken, error) {
	ts, err := s.cfg.Store.APITokens(ctx, a.User.ID, s.cfg.Now())
	if err != nil {
		return nil, stored(err)
	}
	out := make([]api.APIToken, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenAPI(t))
	}
	return out, nil
}

// RevokeOwnToken revokes the actor's own API token id; the connections
// opened with it end.
func (s *App) RevokeOwnToken(ctx context.Context, a Actor, id int64) error {
	err := s.cfg.Store.RevokeAPIToken(ctx, a.User.ID, id)
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("you have no token %d", id), Err: err}
	}
	if err != nil {
		return stored(err)
	}
	s.cfg.AccessChanged()
	return s.audit(ctx, a, "token.revoke", a.User.Name, strconv.FormatInt(id, 10))
}

// RevokeTokenItself revokes the actor's API token whose hash is hash: a
// token revoking itself (gpuportal logout).
func (s *App) RevokeTokenItself(ctx context.Context, a Actor, hash string) error {
	err := s.cfg.Store.RevokeAPITokenByHash(ctx, a.User.ID, hash)
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: "this token is already revoked", Err: err}
	}
	if err != nil {
		return stored(err)
	}
	s.cfg.AccessChanged()
	return s.audit(ctx, a, "token.revoke", a.User.Name, "itself (logout)")
}
