package app

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

func ptr[T any](v T) *T { return &v }

// teamActions are the actions on a team's policies, each on team with
// member, one of its researchers.
var teamActions = []struct {
	name string
	do   func(f *fixture, a Actor, team, member string) error
}{
	{"cap", func(f *fixture, a Actor, team, member string) error {
		return f.app.SetUserCap(context.Background(), a, team, member, api.UserCap{MaxGPUs: ptr(1)})
	}},
	{"time limits", func(f *fixture, a Actor, team, _ string) error {
		return f.app.SetTimeLimits(context.Background(), a, team, api.TimeLimits{Default: "1h", Max: "2h"})
	}},
	{"idle policy", func(f *fixture, a Actor, team, _ string) error {
		return f.app.SetIdlePolicy(context.Background(), a, team, api.IdlePolicy{ReclaimBatch: true, MaxKeepAliveHours: 2})
	}},
	{"session policy", func(f *fixture, a Actor, team, _ string) error {
		return f.app.SetSessionPolicy(context.Background(), a, team, api.SessionPolicy{MaxSessionHours: 8, PriorityGPUs: 1})
	}},
	{"share", func(f *fixture, a Actor, team, _ string) error {
		return f.app.SetTeamShare(context.Background(), a, team, api.TeamShareUpdate{GuaranteeGPUs: ptr(1), Weight: ptr(2.0)})
	}},
}

// TestTeamActionsAuthorization: who may set a team's policies, on their
// own team and on another: its lead and an admin set caps, time limits,
// idle and session policies; only an admin sets its share. Each change
// that is allowed is audited by its actor.
func TestTeamActionsAuthorization(t *testing.T) {
	members := map[string]string{"vision": "alice", "nlp": "bob"}
	f := newFixture(t)
	for who, u := range f.users {
		for team, member := range members {
			for _, act := range teamActions {
				want := "forbidden"
				switch {
				case who == "admin":
					want = "ok"
				case act.name != "share" && u.Role == RoleLead && u.Team == team:
					want = "ok"
				}
				own := "other team"
				if u.Team == team {
					own = "own team"
				}
				t.Run(fmt.Sprintf("%s/%s/%s", who, act.name, own), func(t *testing.T) {
					err := act.do(f, Actor{User: u, From: "192.0.2.1"}, team, member)
					if got := outcome(err); got != want {
						t.Fatalf("%s sets %s of %s: %s (%v), want %s", who, act.name, team, got, err, want)
					}
					if err != nil {
						return
					}
					entries, err := f.store.AuditLog(context.Background(), 1)
					if err != nil {
						t.Fatal(err)
					}
					if len(entries) != 1 || entries[0].Actor != who || entries[0].Target != team || entries[0].From != "192.0.2.1" {
						t.Errorf("last audit entry %+v, want one by %s on %s", entries, who, team)
					}
				})
			}
		}
	}
}

// TestTeamActionsInvalid: a bad value names its field and changes
// nothing; a team that does not exist is not found.
func TestTeamActionsInvalid(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	admin := Actor{User: f.users["admin"]}
	for _, tc := range []struct {
		name  string
		err   error
		field string
	}{
		{"cap without a value", f.app.SetUserCap(ctx, admin, "vision", "alice", api.UserCap{}), "max_gpus"},
		{"cap negative", f.app.SetUserCap(ctx, admin, "vision", "alice", api.UserCap{MaxGPUs: ptr(-1)}), "max_gpus"},
		{"cap of another team's member", f.app.SetUserCap(ctx, admin, "vision", "bob", api.UserCap{MaxGPUs: ptr(1)}), "user"},
		{"cap of nobody", f.app.SetUserCap(ctx, admin, "vision", "nobody", api.UserCap{MaxGPUs: ptr(1)}), "user"},
		{"default above max", f.app.SetTimeLimits(ctx, admin, "vision", api.TimeLimits{Default: "3h", Max: "2h"}), "default_time_limit"},
		{"max not a time", f.app.SetTimeLimits(ctx, admin, "vision", api.TimeLimits{Max: "soon"}), "max_time_limit"},
		{"keep-alive too long", f.app.SetIdlePolicy(ctx, admin, "vision", api.IdlePolicy{MaxKeepAliveHours: 1000}), "max_keep_alive_hours"},
		{"idle after in fractions", f.app.SetIdlePolicy(ctx, admin, "vision", api.IdlePolicy{IdleAfterS: ptr(90.5)}), "idle_after_s"},
		{"idle below 0", f.app.SetIdlePolicy(ctx, admin, "vision", api.IdlePolicy{IdleBelowPct: ptr(0.0)}), "idle_below_pct"},
		{"session hours negative", f.app.SetSessionPolicy(ctx, admin, "vision", api.SessionPolicy{MaxSessionHours: -1}), "max_session_hours"},
		{"priority GPUs too many", f.app.SetSessionPolicy(ctx, admin, "vision", api.SessionPolicy{PriorityGPUs: MaxGPUs + 1}), "priority_gpus"},
		{"weight 0", f.app.SetTeamShare(ctx, admin, "vision", api.TeamShareUpdate{Weight: ptr(0.0)}), "weight"},
		{"guarantee negative", f.app.SetTeamShare(ctx, admin, "vision", api.TeamShareUpdate{GuaranteeGPUs: ptr(-1)}), "guaranteed_gpus"},
	} {
		var e *Error
		if !errors.As(tc.err, &e) || e.Kind != Invalid || e.Field != tc.field {
			t.Errorf("%s: %v, want invalid %s", tc.name, tc.err, tc.field)
		}
	}
	if entries, err := f.store.AuditLog(ctx, 10); err != nil || len(entries) != 0 {
		t.Errorf("refused changes were audited: %+v, %v", entries, err)
	}
	for _, act := range teamActions {
		if act.name == "cap" {
			continue // a team of nobody has no member: the user field is at fault
		}
		if err := act.do(f, admin, "ghosts", ""); KindOf(err) != NotFound {
			t.Errorf("%s of no team: %v, want not found", act.name, err)
		}
	}
}

// TestAdminActionsAuthorization: only an admin manages accounts, join
// tokens and machines; a user may revoke their own API token, nobody
// else's.
func TestAdminActionsAuthorization(t *testing.T) {
	ctx := context.Background()
	n := 0
	// target makes an account to act on, of vision, with an API token.
	target := func(t *testing.T, f *fixture) (string, int64) {
		t.Helper()
		n++
		name := fmt.Sprintf("target%d", n)
		u, err := f.store.CreateUser(ctx, name, "password1", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.CreateAPIToken(ctx, u.ID, "t", time.Now(), time.Hour); err != nil {
			t.Fatal(err)
		}
		ts, err := f.store.UserTokens(ctx, name, time.Now())
		if err != nil || len(ts) != 1 {
			t.Fatalf("tokens of %s: %v, %v", name, ts, err)
		}
		return name, ts[0].ID
	}
	actions := []struct {
		name string
		do   func(t *testing.T, f *fixture, a Actor) error
	}{
		{"create team", func(t *testing.T, f *fixture, a Actor) error {
			n++
			return f.app.CreateTeam(ctx, a, api.CreateTeam{Name: fmt.Sprintf("team%d", n), GuaranteeGPUs: 1})
		}},
		{"create user", func(t *testing.T, f *fixture, a Actor) error {
			n++
			return f.app.CreateUser(ctx, a, api.CreateUser{Name: fmt.Sprintf("user%d", n), Role: "researcher", Team: "nlp", Password: "password1"})
		}},
		{"set role", func(t *testing.T, f *fixture, a Actor) error {
			name, _ := target(t, f)
			return f.app.SetRole(ctx, a, name, api.SetRole{Role: "lead", Team: "vision"})
		}},
		{"reset password", func(t *testing.T, f *fixture, a Actor) error {
			name, _ := target(t, f)
			return f.app.ResetPassword(ctx, a, name, api.SetPassword{Password: "password2"})
		}},
		{"set unix name", func(t *testing.T, f *fixture, a Actor) error {
			name, _ := target(t, f)
			_, err := f.app.SetUnixName(ctx, a, name, api.SetUnixName{UnixName: "u" + name})
			return err
		}},
		{"disable", func(t *testing.T, f *fixture, a Actor) error {
			name, _ := target(t, f)
			_, err := f.app.ChangeAccount(ctx, a, name, DisableAccount)
			return err
		}},
		{"enable", func(t *testing.T, f *fixture, a Actor) error {
			name, _ := target(t, f)
			_, err := f.app.ChangeAccount(ctx, a, name, EnableAccount)
			return err
		}},
		{"delete", func(t *testing.T, f *fixture, a Actor) error {
			name, _ := target(t, f)
			_, err := f.app.ChangeAccount(ctx, a, name, DeleteAccount)
			return err
		}},
		{"list users", func(t *testing.T, f *fixture, a Actor) error {
			_, err := f.app.Users(ctx, a)
			return err
		}},
		{"list tokens", func(t *testing.T, f *fixture, a Actor) error {
			name, _ := target(t, f)
			_, err := f.app.UserTokens(ctx, a, name)
			return err
		}},
		{"revoke a token", func(t *testing.T, f *fixture, a Actor) error {
			name, id := target(t, f)
			return f.app.RevokeUserToken(ctx, a, name, id)
		}},
		{"list join tokens", func(t *testing.T, f *fixture, a Actor) error {
			_, err := f.app.JoinTokens(ctx, a)
			return err
		}},
		{"create a join token", func(t *testing.T, f *fixture, a Actor) error {
			_, err := f.app.CreateJoinToken(ctx, a, api.JoinTokenRequest{Name: "rack 3"})
			return err
		}},
		{"revoke a join token", func(t *testing.T, f *fixture, a Actor) error {
			_, jt, err := f.store.CreateJoinToken(ctx, "rack", "admin", time.Now(), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return f.app.RevokeJoinToken(ctx, a, jt.ID)
		}},
		{"list machines", func(t *testing.T, f *fixture, a Actor) error {
			_, err := f.app.Machines(ctx, a)
			return err
		}},
		{"remove a machine", func(t *testing.T, f *fixture, a Actor) error {
			n++
			name := fmt.Sprintf("m%d", n)
			if _, err := f.store.RegisterMachine(ctx, name, 0, time.Now()); err != nil {
				t.Fatal(err)
			}
			return f.app.RemoveMachine(ctx, a, name)
		}},
	}
	f := newFixture(t)
	for who, u := range f.users {
		for _, act := range actions {
			want := "forbidden"
			if who == "admin" {
				want = "ok"
			}
			t.Run(who+"/"+act.name, func(t *testing.T) {
				if got := outcome(act.do(t, f, Actor{User: u})); got != want {
					t.Errorf("%s %s: %s, want %s", who, act.name, got, want)
				}
			})
		}
	}
	// A user revokes their own token; a teammate may not.
	name, id := target(t, f)
	self, err := f.store.UserByName(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.app.RevokeUserToken(ctx, Actor{User: f.users["alice"]}, name, id); KindOf(err) != Forbidden {
		t.Errorf("alice revokes %s's token: %v, want forbidden", name, err)
	}
	if err := f.app.RevokeUserToken(ctx, Actor{User: userView(self)}, name, id); err != nil {
		t.Errorf("%s revokes their own token: %v", name, err)
	}
}

// TestAdminCannotLockThemselvesOut: an admin may not disable, delete or
// change the role of their own account.
func TestAdminCannotLockThemselvesOut(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	admin := Actor{User: f.users["admin"]}
	for _, act := range []AccountAction{DisableAccount, DeleteAccount} {
		if _, err := f.app.ChangeAccount(ctx, admin, "admin", act); KindOf(err) != Conflict {
			t.Errorf("admin %s themselves: %v, want conflict", act, err)
		}
	}
	if err := f.app.SetRole(ctx, admin, "admin", api.SetRole{Role: "researcher", Team: "vision"}); KindOf(err) != Invalid {
		t.Errorf("admin demotes themselves: %v, want invalid", err)
	}
	if _, err := f.app.ChangeAccount(ctx, admin, "nobody", DisableAccount); KindOf(err) != NotFound {
		t.Errorf("disable nobody: %v, want not found", err)
	}
}

// TestAccessChangedTold: a change that ends or narrows someone's access
// tells Config.AccessChanged, so that live connections check theirs.
func TestAccessChangedTold(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	told := 0
	f.app.cfg.AccessChanged = func() { told++ }
	admin := Actor{User: f.users["admin"]}
	steps := []struct {
		name string
		do   func() error
	}{
		{"set role", func() error { return f.app.SetRole(ctx, admin, "carol", api.SetRole{Role: "researcher", Team: "nlp"}) }},
		{"reset password", func() error { return f.app.ResetPassword(ctx, admin, "carol", api.SetPassword{Password: "password2"}) }},
		{"disable", func() error { _, err := f.app.ChangeAccount(ctx, admin, "carol", DisableAccount); return err }},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if told != i+1 {
			t.Errorf("after %s: told %d times, want %d", st.name, told, i+1)
		}
	}
}

// TestJoinTokenTTL: a join token's ttl_s is checked in seconds, so a
// number too large for a Duration is refused rather than wrapping round
// to a token that never expires or one gone within a second.
func TestJoinTokenTTL(t *testing.T) {
	f := newFixture(t)
	admin := Actor{User: f.users["admin"]}
	maxS := int64(MaxJoinTokenTTL / time.Second)
	for _, tc := range []struct {
		name string
		ttlS int64
		ok   bool
	}{
		{"until revoked", 0, true},
		{"a day", 86400, true},
		{"the most", maxS, true},
		{"a second over", maxS + 1, false},
		{"negative", -1, false},
		{"wraps to never", 99999999999999999, false},
		{"wraps to under a second", 18446744074, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			made, err := f.app.CreateJoinToken(context.Background(), admin, api.JoinTokenRequest{Name: "rack", TTLS: ptr(tc.ttlS)})
			if !tc.ok {
				if KindOf(err) != Invalid {
					t.Fatalf("made %+v, err %v; want ttl_s refused", made.JoinToken, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch exp := made.JoinToken.ExpiresAt; {
			case tc.ttlS == 0 && exp != nil:
				t.Errorf("expires %v, want never", exp)
			case tc.ttlS > 0 && (exp == nil || exp.Sub(made.JoinToken.CreatedAt) != time.Duration(tc.ttlS)*time.Second):
				t.Errorf("expires %v after %v, want %ds after", exp, made.JoinToken.CreatedAt, tc.ttlS)
			}
		})
	}
}
