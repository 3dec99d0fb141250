package app

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
)

// TestTeamMembersAuthorization: a team's page is for its members (lead
// included) and admins; the lead of another team and a disabled member
// are refused, and a team that does not exist is not found.
func TestTeamMembersAuthorization(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.disabled(t)
	if err := f.app.SetUserCap(ctx, Actor{User: f.users["visionlead"]}, "vision", "alice", apiCap(1)); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		who, team string
		want      Kind // 0: seen
	}{
		{"alice", "vision", 0},
		{"visionlead", "vision", 0},
		{"nlplead", "vision", Forbidden},
		{"bob", "vision", Forbidden},
		{"admin", "vision", 0},
		{"admin", "nlp", 0},
		{"dora", "vision", Forbidden},
		{"admin", "nope", NotFound},
	} {
		t.Run(tc.who+" "+tc.team, func(t *testing.T) {
			team, err := f.app.TeamMembers(ctx, Actor{User: f.users[tc.who]}, tc.team, since)
			if KindOf(err) != tc.want || (tc.want == 0 && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want != 0 {
				return
			}
			want := map[string]int{"vision": 4, "nlp": 2}[tc.team] // dora, disabled, is still a member
			if len(team.Members) != want {
				t.Errorf("%d members, want %d: %+v", len(team.Members), want, team.Members)
			}
			if tc.team == "vision" && team.Caps["alice"] != 1 {
				t.Errorf("caps = %v, want alice's 1", team.Caps)
			}
		})
	}
}

func apiCap(n int) api.UserCap { return api.UserCap{MaxGPUs: &n} }
