package app

import (
	"context"
	"testing"
	"time"
)

// TestAdminOverview: only an enabled admin reads the overview, which
// lists every account with its own tokens and the audit log; everyone
// signed in and enabled reads the teams' shares.
func TestAdminOverview(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.disabled(t)
	if _, err := f.app.CreateToken(ctx, Actor{User: f.users["bob"], From: "10.0.0.2"}, "script", time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who         string
		admin, team bool // may read the overview, the teams
	}{
		{"alice", false, true}, {"visionlead", false, true}, {"nlplead", false, true},
		{"admin", true, true}, {"dora", false, false},
	} {
		t.Run(tc.who, func(t *testing.T) {
			a := Actor{User: f.users[tc.who]}
			o, err := f.app.AdminOverview(ctx, a, 10)
			if !tc.admin {
				if KindOf(err) != Forbidden {
					t.Errorf("overview: err = %v, want forbidden", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if len(o.Users) != 7 || len(o.Teams) != 2 || len(o.Tokens["bob"]) != 1 || len(o.Tokens) != 1 {
					t.Errorf("overview: %d users, %d teams, tokens %v; want 7, 2, bob's one", len(o.Users), len(o.Teams), o.Tokens)
				}
				if len(o.Audit) == 0 || o.Audit[0].Action != "token.create" || o.Audit[0].From != "10.0.0.2" {
					t.Errorf("audit log = %+v, want bob's token first", o.Audit)
				}
			}
			ts, err := f.app.Teams(ctx, a)
			if tc.team != (err == nil) || (err == nil && len(ts) != 2) {
				t.Errorf("teams: %v, %v; want them read %v", ts, err, tc.team)
			}
		})
	}
}
