package app

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuportal/gpuportal/identity"
	"github.com/gpuportal/gpuportal/models"
)

// fakeDirectory is an LDAP directory of people by name, each with the
// password "directory1".
type fakeDirectory map[string]identity.Claims

func (d fakeDirectory) Authenticate(_ context.Context, name, password string) (identity.Claims, error) {
	cl, ok := d[name]
	if !ok || password != "directory1" {
		return identity.Claims{}, identity.ErrBadCredentials
	}
	return cl, nil
}

func (d fakeDirectory) Lookup(_ context.Context, subject string) (identity.Claims, bool, error) {
	for _, cl := range d {
		if cl.Subject == subject {
			return cl, true, nil
		}
	}
	return identity.Claims{}, false, nil
}

func person(name string, groups ...string) identity.Claims {
	return identity.Claims{Source: SourceLDAP, Subject: "uid=" + name + ",dc=lab", Name: name, Groups: groups}
}

// signIns maps group cv to team vision, nl to nlp and leads to the lead
// role, over dir.
func signIns(dir fakeDirectory) SignIns {
	return SignIns{Directory: dir, Config: identity.Config{Mapping: identity.Mapping{Rules: []identity.Rule{
		{Group: "cv", Team: "vision"}, {Group: "nl", Team: "nlp"}, {Group: "leads", Role: "lead"}}}}}
}

// TestCheckPassword: who a name and password prove to be, with a
// directory: local accounts by their own password, the directory's
// people by theirs, made at first sign-in with the team and role their
// groups give; a disabled account and a person of no team are refused.
func TestCheckPassword(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.disabled(t)
	in := signIns(fakeDirectory{"erin": person("erin", "cv", "leads"), "frank": person("frank", "music"),
		"alice": person("alice", "nl"), "dora": person("dora", "cv")})
	for _, tc := range []struct {
		name, user, password string
		want                 string // the user's team and role, or what the refusal is
	}{
		{"a local account", "alice", "password1", "vision researcher"},
		{"a local account, not linked", "alice", "directory1", "bad"},
		{"a local admin", "admin", "password1", " admin"},
		{"a directory lead, made", "erin", "directory1", "vision lead"},
		{"a directory lead again", "erin", "directory1", "vision lead"},
		{"a wrong password", "erin", "password1", "bad"},
		{"nobody", "zed", "directory1", "bad"},
		{"no group gives a team", "frank", "directory1", "forbidden"},
		{"a disabled local account", "dora", "password1", "disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := f.app.CheckPassword(ctx, in, tc.user, tc.password, "10.0.0.1")
			got := ""
			switch {
			case errors.Is(err, ErrBadCredentials):
				got = "bad"
			case errors.Is(err, ErrDisabled):
				got = "disabled"
			case KindOf(err) == Forbidden:
				got = "forbidden"
			case err != nil:
				t.Fatal(err)
			default:
				got = u.Team + " " + string(u.Role)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	es, err := f.store.AuditLog(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, e := range es {
		if e.Action == "user.create" && e.Target == "erin" && e.Actor == "sign-in:ldap" && e.From == "10.0.0.1" {
			made++
		}
	}
	if made != 1 {
		t.Errorf("erin's account made %d times in the audit log, want once", made)
	}
}

// TestSyncDirectory: the sync follows each directory account's groups,
// and ends the sessions of one gone from the directory or in no team's
// group, telling live connections at once.
func TestSyncDirectory(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	told := 0
	f.app.cfg.AccessChanged = func() { told++ }
	dir := fakeDirectory{"erin": person("erin", "cv"), "gina": person("gina", "cv"), "hal": person("hal", "nl")}
	in := signIns(dir)
	sessions := map[string]string{}
	for name := range dir {
		u, err := f.app.CheckPassword(ctx, in, name, "directory1", "")
		if err != nil {
			t.Fatal(err)
		}
		if sessions[name], err = f.app.StartSession(ctx, u, 3600e9); err != nil {
			t.Fatal(err)
		}
	}
	dir["erin"] = person("erin", "nl", "leads") // moved to nlp, as its lead
	dir["gina"] = person("gina", "music")       // in no team's group
	delete(dir, "hal")                          // gone
	told = 0
	if err := f.app.SyncDirectory(ctx, in); err != nil {
		t.Fatal(err)
	}
	erin, err := f.store.UserByName(ctx, "erin")
	if err != nil || erin.Team != "nlp" || erin.Role != models.RoleLead {
		t.Fatalf("erin after the sync: %+v, %v; want lead of nlp", erin, err)
	}
	for name, want := range map[string]bool{"erin": true, "gina": false, "hal": false} {
		_, err := f.app.SessionUser(ctx, sessions[name])
		if (err == nil) != want {
			t.Errorf("%s's session after the sync: err = %v, want it kept %v", name, err, want)
		}
	}
	if told != 3 {
		t.Errorf("live connections told %d times, want 3 (one move, two ended)", told)
	}
	if err := f.app.SyncDirectory(ctx, SignIns{}); err != nil {
		t.Errorf("no directory: %v", err)
	}
}
