package web

import (
	"context"
	"time"
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

// syncLDAPAccounts brings every account from the directory up to date
// (app.App.SyncDirectory).
func (s *Server) syncLDAPAccounts(ctx context.Context) error {
	return s.app.SyncDirectory(ctx, s.signIns())
}
