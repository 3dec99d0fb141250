package web

import (
	"context"
	"testing"

	"github.com/gpuportal/gpuportal/app"
)

// TestDeliveriesJudgeTheCurrentUser: a follower whose user may no longer
// see a team gets none of its updates, even before the periodic check
// unsubscribes them.
func TestDeliveriesJudgeTheCurrentUser(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	m, err := ts.app.Moment(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stays := newClient(&app.User{ID: 1, Name: "lead", Role: app.RoleLead, Team: "vision"}, nil)
	moved := newClient(&app.User{ID: 2, Name: "alice", Role: app.RoleResearcher, Team: "vision"}, nil)
	for _, c := range []*wsClient{stays, moved} {
		ts.hub.add(c)
		ts.hub.follow(c, "team:vision")
	}
	moved.user.Store(&app.User{ID: 2, Name: "alice", Role: app.RoleResearcher, Team: "nlp"})
	ts.publishTeams(context.Background(), m)
	if got := len(stays.next()); got != 1 {
		t.Errorf("a member got %d updates of team:vision, want 1", got)
	}
	if got := moved.next(); len(got) != 0 {
		t.Errorf("a user moved to nlp got %d updates of team:vision: %+v", len(got), got)
	}
}

// TestSocketsPerUser caps one user's live connections.
func TestSocketsPerUser(t *testing.T) {
	t.Parallel()
	ls := newLiveServer(t)
	for i := range ls.cfg.MaxSocketsPerUser {
		if _, _, err := ls.dial(t, "alice", "jct"); err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
	}
	_, resp, err := ls.dial(t, "alice", "jct")
	if err == nil || resp == nil || resp.StatusCode != 429 {
		t.Fatalf("connection %d: %v, want 429", ls.cfg.MaxSocketsPerUser+1, err)
	}
	if _, _, err := ls.dial(t, "bob", "jct"); err != nil {
		t.Errorf("another user: %v", err)
	}
}
