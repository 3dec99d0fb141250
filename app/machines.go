package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// Join tokens and registered machines, for admins (docs/agents.md,
// "Joining machines"): the same actions as `gpuportal admin
// create-join-token` and its siblings, audited.

// The life of a join token: a day unless asked otherwise, a year at most.
const (
	DefaultJoinTokenTTL = 24 * time.Hour
	MaxJoinTokenTTL     = 365 * 24 * time.Hour
)

// joinTokenAPI is t as the API shows a join token at now.
func joinTokenAPI(t models.JoinToken, now time.Time) api.JoinToken {
	return api.JoinToken{ID: t.ID, Name: t.Name, Active: t.Active(now), Machines: t.Uses, CreatedBy: t.CreatedBy,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
}

// JoinTokens lists every join token, for an admin.
func (s *App) JoinTokens(ctx context.Context, a Actor) ([]api.JoinToken, error) {
	if err := onlyAdmins(a); err != nil {
		return nil, err
	}
	ts, err := s.cfg.Store.JoinTokens(ctx)
	if err != nil {
		return nil, stored(err)
	}
	now := s.cfg.Now()
	out := make([]api.JoinToken, 0, len(ts))
	for _, t := range ts {
		out = append(out, joinTokenAPI(t, now))
	}
	return out, nil
}

// CreateJoinToken makes a join token, for an admin, and returns it with
// its secret, shown this once.
func (s *App) CreateJoinToken(ctx context.Context, a Actor, req api.JoinTokenRequest) (api.NewJoinToken, error) {
	if err := onlyAdmins(a); err != nil {
		return api.NewJoinToken{}, err
	}
	if req.Name == "" || len(req.Name) > 128 {
		return api.NewJoinToken{}, invalid("name", "name: want 1 to 128 characters")
	}
	ttl := DefaultJoinTokenTTL
	if req.TTLS != nil {
		// Compared in seconds: a huge ttl_s made a Duration that wrapped
		// round, to "until revoked" or to a token gone in a second.
		if *req.TTLS < 0 || *req.TTLS > int64(MaxJoinTokenTTL/time.Second) {
			return api.NewJoinToken{}, invalid("ttl_s", "ttl_s: want 0 (until revoked) to %d seconds", int64(MaxJoinTokenTTL/time.Second))
		}
		ttl = time.Duration(*req.TTLS) * time.Second
	}
	token, t, err := s.cfg.Store.CreateJoinToken(ctx, req.Name, a.User.Name, s.cfg.Now(), ttl)
	if err != nil {
		return api.NewJoinToken{}, stored(err)
	}
	if err := s.audit(ctx, a, "join-token.create", strconv.FormatInt(t.ID, 10), fmt.Sprintf("%s, ttl %s", t.Name, ttl)); err != nil {
		return api.NewJoinToken{}, err
	}
	return api.NewJoinToken{Token: token, JoinToken: joinTokenAPI(*t, s.cfg.Now())}, nil
}

// RevokeJoinToken revokes join token id, for an admin: no more machines
// join with it; those that did stay.
func (s *App) RevokeJoinToken(ctx context.Context, a Actor, id int64) error {
	if err := onlyAdmins(a); err != nil {
		return err
	}
	err := s.cfg.Store.RevokeJoinToken(ctx, id, s.cfg.Now())
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("no active join token %d", id), Err: err}
	}
	if err != nil {
		return stored(err)
	}
	return s.audit(ctx, a, "join-token.revoke", strconv.FormatInt(id, 10), "")
}

// Machines lists the machines agents registered, for an admin.
func (s *App) Machines(ctx context.Context, a Actor) ([]api.Machine, error) {
	if err := onlyAdmins(a); err != nil {
		return nil, err
	}
	ms, err := s.cfg.Store.Machines(ctx)
	if err != nil {
		return nil, stored(err)
	}
	out := make([]api.Machine, 0, len(ms))
	for _, m := range ms {
		out = append(out, api.Machine{Name: m.Name, JoinedWith: m.JoinedWith, CreatedAt: m.CreatedAt, LastSeenAt: m.LastSeenAt})
	}
	return out, nil
}

// RemoveMachine forgets the registered machine name, for an admin: its
// agent must join again.
func (s *App) RemoveMachine(ctx context.Context, a Actor, name string) error {
	if err := onlyAdmins(a); err != nil {
		return err
	}
	err := s.cfg.Store.RemoveMachine(ctx, name)
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("no machine %q registered", name), Err: err}
	}
	if err != nil {
		return stored(err)
	}
	return s.audit(ctx, a, "machine.remove", name, "")
}
