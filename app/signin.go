package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/identity"
	"github.com/gpuportal/gpuportal/models"
)

// Signing in: a local account's password, or a person the lab's LDAP
// directory or OpenID Connect provider vouches for, whose account is made
// at their first sign-in and follows their groups (role, team, Unix
// account) at each sign-in and each directory sync. The protocols
// themselves are package identity's; the browser's side of them,
// package web's.

// Where an account signs in (api.User.Source).
const (
	SourceLocal = models.SourceLocal
	SourceLDAP  = models.SourceLDAP
	SourceOIDC  = models.SourceOIDC
)

// IdentityStore is what sign-in through a source and the directory sync
// read and write.
type IdentityStore interface {
	SyncExternalUser(ctx context.Context, x models.ExternalUser, linkLocal bool, now time.Time) (models.SignIn, error)
	UsersFrom(ctx context.Context, source string) ([]models.User, error)
	EndCredentials(ctx context.Context, name string) (int64, error)
}

// Directory is the lab's LDAP directory as sign-in reads it;
// *ldapdir.Directory is one.
type Directory interface {
	Authenticate(ctx context.Context, name, password string) (identity.Claims, error)
	Lookup(ctx context.Context, subject string) (identity.Claims, bool, error)
}

// SignIns is how people sign in on this server: its sign-in settings
// (serve --ldap-*, --oidc-*, the group mapping) and its directory.
type SignIns struct {
	Config identity.Config
	// Directory is the LDAP directory; nil: none.
	Directory Directory
}

// SessionTTL is how long a session of u lasts, at most ttl: a person
// from a source signs in again sooner, so that their groups are read
// again.
func (in SignIns) SessionTTL(u *User, ttl time.Duration) time.Duration {
	if u.Source != SourceLocal && in.Config.SessionTTL > 0 {
		return min(ttl, time.Duration(in.Config.SessionTTL))
	}
	return ttl
}

// CheckPassword is who name and password prove to be, signing in from
// the address from: a local account checked here, or a person of the
// directory, whose account is made or brought up to date with their
// groups (SignIn). A local account keeps its password while LDAP is on
// (break-glass admins); with LinkLocalAccounts, a local account whose
// password does not match may sign in with its directory password
// instead, which links it. A wrong name or password is
// ErrBadCredentials; a disabled account, ErrDisabled; a directory that
// cannot be reached, an error identity.Unavailable tells.
func (s *App) CheckPassword(ctx context.Context, in SignIns, name, password, from string) (*User, error) {
	u, err := s.checkPassword(ctx, in, name, password, from)
	return userView(u), err
}

// checkPassword is CheckPassword's row.
func (s *App) checkPassword(ctx context.Context, in SignIns, name, password, from string) (*models.User, error) {
	if in.Directory == nil {
		return s.cfg.Store.Authenticate(ctx, name, password)
	}
	u, err := s.cfg.Store.UserByName(ctx, name)
	switch {
	case err != nil && !errors.Is(err, models.ErrNotFound):
		return nil, stored(err)
	case err == nil && u.Source == SourceLocal:
		lu, err := s.cfg.Store.Authenticate(ctx, name, password)
		if !errors.Is(err, ErrBadCredentials) || !in.Config.LinkLocalAccounts {
			return lu, err
		}
	case err == nil && u.Source == SourceOIDC:
		s.cfg.Logger.Info("password login refused: the account signs in through OpenID Connect", "user", name)
		return nil, ErrBadCredentials
	}
	cl, err := in.Directory.Authenticate(ctx, name, password)
	if errors.Is(err, identity.ErrBadCredentials) {
		return nil, ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	return s.signIn(ctx, in, cl, from)
}

// SignIn records a person a source vouched for, signing in from the
// address from: their role and team from their groups, the account made
// on first sign-in, changes audited and live connections checked again
// at once, so that a team lost at the source is lost on every open
// page. A person whom no group gives a team, or whose name is another
// account's, is refused (Forbidden); a disabled account, ErrDisabled.
func (s *App) SignIn(ctx context.Context, in SignIns, cl identity.Claims, from string) (*User, error) {
	u, err := s.signIn(ctx, in, cl, from)
	return userView(u), err
}

// signIn is SignIn's row.
func (s *App) signIn(ctx context.Context, in SignIns, cl identity.Claims, from string) (*models.User, error) {
	role, team, err := in.Config.Mapping.Resolve(cl.Groups)
	if err != nil {
		s.cfg.Logger.Info("sign-in refused: no team", "user", cl.Name, "source", cl.Source, "groups", cl.Groups)
		return nil, forbidden("None of your groups gives you a team in the portal: ask an admin to map one of them.")
	}
	got, err := s.cfg.Store.SyncExternalUser(ctx, models.ExternalUser{Source: cl.Source, Subject: cl.Subject,
		Name: cl.Name, UnixName: cl.UnixName, Role: models.Role(role), Team: team}, in.Config.LinkLocalAccounts, s.cfg.Now())
	switch {
	case errors.Is(err, models.ErrOtherSource):
		s.cfg.Logger.Warn("sign-in refused: the name belongs to another account", "user", cl.Name, "source", cl.Source, "err", err)
		return nil, forbidden("An account named %s already exists here and signs in another way: ask an admin.", cl.Name)
	case errors.Is(err, models.ErrInvalid):
		s.cfg.Logger.Warn("sign-in refused: the source's account does not fit", "user", cl.Name, "source", cl.Source, "err", err)
		return nil, forbidden("Your account at the identity source does not fit the portal: %s. Ask an admin.",
			strings.TrimSuffix(err.Error(), ": "+models.ErrInvalid.Error()))
	case errors.Is(err, ErrDisabled):
		return nil, err
	case err != nil:
		return nil, stored(err)
	}
	by := Actor{User: &User{Name: "sign-in:" + cl.Source}, From: from}
	if got.Created {
		s.cfg.Logger.Info("account made at first sign-in", "user", cl.Name, "source", cl.Source, "role", role, "team", team)
		if err := s.audit(ctx, by, "user.create", cl.Name, fmt.Sprintf("from %s: role %s team %s", cl.Source, role, team)); err != nil {
			return nil, err
		}
	}
	if err := s.recordChanges(ctx, by, got); err != nil {
		return nil, err
	}
	return got.User, nil
}

// recordChanges logs and audits what a sign-in or a directory sync
// changed of an account, and has live connections checked again at once,
// so that they lose the topics of a team the account left.
func (s *App) recordChanges(ctx context.Context, by Actor, in models.SignIn) error {
	if len(in.Changed) == 0 {
		return nil
	}
	s.cfg.Logger.Info("account changed from its source", "user", in.User.Name, "source", in.User.Source, "by", by.User.Name, "changes", in.Changed)
	if err := s.audit(ctx, by, "user.sync", in.User.Name, strings.Join(in.Changed, "; ")); err != nil {
		return err
	}
	s.cfg.AccessChanged()
	return nil
}

// SyncDirectory brings every account from the directory up to date: its
// team, role and Unix account from its entry and groups now. The
// sessions and API tokens of an account whose entry is gone, or whose
// groups no longer give it a team, are ended: it could not sign in
// again. A directory that cannot be reached changes nothing.
func (s *App) SyncDirectory(ctx context.Context, in SignIns) error {
	if in.Directory == nil {
		return nil
	}
	us, err := s.cfg.Store.UsersFrom(ctx, SourceLDAP)
	if err != nil {
		return stored(err)
	}
	by := Actor{User: &User{Name: "sync:ldap"}, From: "directory"}
	for _, u := range us {
		if u.Disabled() {
			continue
		}
		cl, found, err := in.Directory.Lookup(ctx, u.Subject)
		if err != nil {
			return err
		}
		role, team := "", ""
		if found {
			role, team, err = in.Config.Mapping.Resolve(cl.Groups)
		}
		if !found || errors.Is(err, identity.ErrNoTeam) {
			if err := s.endDirectoryAccess(ctx, by, u.Name, found); err != nil {
				return err
			}
			continue
		}
		got, err := s.cfg.Store.SyncExternalUser(ctx, models.ExternalUser{Source: SourceLDAP, Subject: u.Subject,
			Name: u.Name, UnixName: cl.UnixName, Role: models.Role(role), Team: team}, false, s.cfg.Now())
		if errors.Is(err, models.ErrInvalid) || errors.Is(err, ErrDisabled) {
			s.cfg.Logger.Warn("directory sync: account left as it is", "user", u.Name, "err", err)
			continue
		}
		if err != nil {
			return stored(err)
		}
		if err := s.recordChanges(ctx, by, got); err != nil {
			return err
		}
	}
	return nil
}

// endDirectoryAccess ends the sessions and tokens of the account name,
// whom the directory no longer lets in (found: the entry is there, in no
// mapped group).
func (s *App) endDirectoryAccess(ctx context.Context, by Actor, name string, found bool) error {
	ended, err := s.cfg.Store.EndCredentials(ctx, name)
	if err != nil || ended == 0 {
		return stored(err)
	}
	why := "gone from the directory"
	if found {
		why = "in no group that gives a team"
	}
	s.cfg.Logger.Info("directory sync: sessions and tokens ended", "user", name, "why", why)
	s.cfg.AccessChanged() // their live connections close
	return s.audit(ctx, by, "user.sync", name, why+": sessions and API tokens ended")
}
