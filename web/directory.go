package web

import (
	"context"
	"errors"
	"time"

	"github.com/gpuportal/gpuportal/identity"
	"github.com/gpuportal/gpuportal/models"
)

// syncDirectory reads the accounts from the LDAP directory again every
// --ldap-sync-interval, between their sign-ins, until ctx ends.
func (s *Server) syncDirectory(ctx context.Context) {
	every := time.Duration(s.cfg.SignIn.LDAP.SyncInterval)
	if s.ldap == nil || every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.syncLDAPAccounts(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("directory sync", "err", err)
			}
		}
	}
}

// syncLDAPAccounts brings every account from the directory up to date:
// its team, role and Unix account from its entry and groups now. The
// sessions and API tokens of an account whose entry is gone, or whose
// groups no longer give it a team, are ended: it could not sign in
// again. A directory that cannot be reached changes nothing.
func (s *Server) syncLDAPAccounts(ctx context.Context) error {
	us, err := s.cfg.Store.UsersFrom(ctx, models.SourceLDAP)
	if err != nil {
		return err
	}
	by := actor{user: &models.User{Name: "sync:ldap"}, from: "directory"}
	for _, u := range us {
		if u.Disabled() {
			continue
		}
		cl, found, err := s.ldap.Lookup(ctx, u.Subject)
		if err != nil {
			return err
		}
		role, team := "", ""
		if found {
			role, team, err = s.cfg.SignIn.Mapping.Resolve(cl.Groups)
		}
		if !found || errors.Is(err, identity.ErrNoTeam) {
			if err := s.endDirectoryAccess(ctx, by, u, found); err != nil {
				return err
			}
			continue
		}
		in, err := s.cfg.Store.SyncExternalUser(ctx, models.ExternalUser{Source: models.SourceLDAP, Subject: u.Subject,
			Name: u.Name, UnixName: cl.UnixName, Role: models.Role(role), Team: team}, false, s.cfg.Now())
		if errors.Is(err, models.ErrInvalid) || errors.Is(err, models.ErrDisabled) {
			s.cfg.Logger.Warn("directory sync: account left as it is", "user", u.Name, "err", err)
			continue
		}
		if err != nil {
			return err
		}
		if err := s.recordChanges(ctx, by, in); err != nil {
			return err
		}
	}
	return nil
}

// endDirectoryAccess ends the sessions and tokens of u, whom the
// directory no longer lets in (found: the entry is there, in no mapped
// group).
func (s *Server) endDirectoryAccess(ctx context.Context, by actor, u models.User, found bool) error {
	ended, err := s.cfg.Store.EndCredentials(ctx, u.Name)
	if err != nil || ended == 0 {
		return err
	}
	why := "gone from the directory"
	if found {
		why = "in no group that gives a team"
	}
	s.cfg.Logger.Info("directory sync: sessions and tokens ended", "user", u.Name, "why", why)
	s.hub.poke() // their live connections close
	return s.auditBy(ctx, by, "user.sync", u.Name, why+": sessions and API tokens ended")
}
