package models_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuportal/gpuportal/models"
)

func TestCheckUnixName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"alice", true}, {"a_lice-2.x", true}, {"_svc", true}, {"u1000x", true},
		{"", false}, {"Alice", false}, {"-alice", false}, {".alice", false}, {"1000", false},
		{"al ice", false}, {"al/ice", false}, {"abcdefghijklmnopqrstuvwxyz0123456", false},
	} {
		if err := models.CheckUnixName(tc.name); (err == nil) != tc.ok {
			t.Errorf("CheckUnixName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// TestExternalSignIn: accounts made at first sign-in, their team and role
// following the source's groups at each sign-in, the Unix account from
// the source or an admin, and names that sign in elsewhere refused.
func TestExternalSignIn(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		local, err := s.CreateUser(ctx, "carol", "pw", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := s.UnixName(ctx, "carol"); got != "carol" || local.Source != models.SourceLocal {
			t.Errorf("local user: unix name %q source %q, want carol local", got, local.Source)
		}
		dave := models.ExternalUser{Source: models.SourceLDAP, Subject: "uid=dave,ou=people,dc=lab",
			Name: "dave", Role: models.RoleResearcher, Team: "vision"}
		in, err := s.SyncExternalUser(ctx, dave, false, t0)
		if err != nil || !in.Created || in.User.Team != "vision" || in.User.Source != models.SourceLDAP {
			t.Fatalf("first sign-in: %+v, %v", in, err)
		}
		if got, _ := s.UnixName(ctx, "dave"); got != "dave" {
			t.Errorf("unix name defaults to the login name: got %q", got)
		}
		if _, err := s.Authenticate(ctx, "dave", ""); !errors.Is(err, models.ErrBadCredentials) {
			t.Errorf("an LDAP account has no local password: %v", err)
		}
		if err := s.SetPassword(ctx, "dave", "a-local-password"); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("a local password set on an LDAP account: %v", err)
		}
		// The group changed at the source: the team moves (a new one is made),
		// and the directory names a Unix account.
		dave.Team, dave.Role, dave.UnixName = "speech", models.RoleLead, "dmiller"
		in, err = s.SyncExternalUser(ctx, dave, false, t0)
		if err != nil || in.Created || in.User.Team != "speech" || in.User.Role != models.RoleLead || len(in.Changed) != 3 {
			t.Fatalf("second sign-in: %+v, %v", in, err)
		}
		if got, _ := s.UnixName(ctx, "dave"); got != "dmiller" {
			t.Errorf("unix name from the directory: got %q", got)
		}
		// An admin's choice stays while the source names none.
		if err := s.SetUnixName(ctx, "dave", "dave2"); err != nil {
			t.Fatal(err)
		}
		dave.UnixName = ""
		if in, err = s.SyncExternalUser(ctx, dave, false, t0); err != nil || len(in.Changed) != 0 {
			t.Fatalf("unchanged sign-in: %+v, %v", in, err)
		}
		if got, _ := s.UnixName(ctx, "dave"); got != "dave2" {
			t.Errorf("admin's unix name: got %q", got)
		}
		if err := s.SetUnixName(ctx, "dave", "Dave"); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("bad unix name: %v", err)
		}
		if err := s.SetUnixName(ctx, "nobody", "x"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("unknown user: %v", err)
		}
		// A local account of the same name is not taken over unless asked.
		carol := models.ExternalUser{Source: models.SourceOIDC, Subject: "https://idp|c1", Name: "carol",
			Role: models.RoleResearcher, Team: "vision"}
		if _, err := s.SyncExternalUser(ctx, carol, false, t0); !errors.Is(err, models.ErrOtherSource) {
			t.Errorf("local account taken over: %v", err)
		}
		if in, err := s.SyncExternalUser(ctx, carol, true, t0); err != nil || in.Created || in.User.ID != local.ID || in.User.Source != models.SourceOIDC {
			t.Errorf("link local: %+v, %v", in, err)
		}
		// An LDAP account is not taken by an OIDC sign-in of the same name.
		if _, err := s.SyncExternalUser(ctx, models.ExternalUser{Source: models.SourceOIDC, Subject: "x|dave", Name: "dave",
			Role: models.RoleResearcher, Team: "vision"}, true, t0); !errors.Is(err, models.ErrOtherSource) {
			t.Errorf("ldap account taken by oidc: %v", err)
		}
		if _, err := s.DisableUser(ctx, "dave", "admin", t0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SyncExternalUser(ctx, dave, false, t0); !errors.Is(err, models.ErrDisabled) {
			t.Errorf("disabled account signs in: %v", err)
		}
	})
}

// TestExternalSignInRace: two first sign-ins of one person at once make
// one account, and both succeed.
func TestExternalSignInRace(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		x := models.ExternalUser{Source: models.SourceOIDC, Subject: "https://idp|u-ivy", Name: "ivy",
			Role: models.RoleResearcher, Team: "speech"}
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := s.SyncExternalUser(ctx, x, false, t0)
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("sign-in: %v", err)
			}
		}
		us, err := s.UsersFrom(ctx, models.SourceOIDC)
		if err != nil || len(us) != 1 || us[0].Name != "ivy" {
			t.Errorf("accounts from oidc: %+v, %v", us, err)
		}
	})
}
