package app

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestListJobsAuthorization: which of alice's jobs (vision) each user
// lists, by scope and team asked for: a team's own members and lead see
// them, another team does not, an admin sees every team's.
func TestListJobsAuthorization(t *testing.T) {
	f := newFixture(t)
	id := f.job(t, false)
	for _, tc := range []struct {
		actor       string
		scope, team string
		want        string // "ok": listed; "none": not listed; else the error's kind
	}{
		{"alice", "", "", "ok"}, // owner
		{"alice", "mine", "", "ok"},
		{"carol", "", "", "ok"}, // teammate
		{"carol", "mine", "", "none"},
		{"visionlead", "team", "", "ok"}, // lead
		{"bob", "", "", "none"},          // other team
		{"bob", "", "vision", "forbidden"},
		{"bob", "all", "", "forbidden"},
		{"nlplead", "team", "vision", "forbidden"},
		{"admin", "", "", "ok"},
		{"admin", "all", "vision", "ok"},
		{"admin", "all", "nlp", "none"},
		{"alice", "everyone", "", "invalid"},
	} {
		p, err := f.app.ListJobs(context.Background(), Actor{User: f.users[tc.actor]},
			JobListRequest{Scope: tc.scope, Team: tc.team, Limit: 10})
		got := outcome(err)
		if err == nil {
			got = "none"
			for _, j := range p.Jobs {
				if j.ID == id {
					got = "ok"
				}
			}
		}
		if got != tc.want {
			t.Errorf("%s, scope %q, team %q: %s, want %s", tc.actor, tc.scope, tc.team, got, tc.want)
		}
	}
}

// TestListJobsBadInput: each bad field is an invalid request naming it.
func TestListJobsBadInput(t *testing.T) {
	f := newFixture(t)
	a := Actor{User: f.users["alice"]}
	for _, tc := range []struct {
		req   JobListRequest
		field string
	}{
		{JobListRequest{State: "running,nope", Limit: 10}, "state"},
		{JobListRequest{Kind: "gpu", Limit: 10}, "kind"},
		{JobListRequest{Queue: "-1", Limit: 10}, "queue"},
		{JobListRequest{Cursor: JobCursor('z', 3), Limit: 10}, "cursor"},
		{JobListRequest{Limit: 0}, "limit"},
		{JobListRequest{Limit: MaxListLimit + 1}, "limit"},
	} {
		_, err := f.app.ListJobs(context.Background(), a, tc.req)
		var e *Error
		if !errors.As(err, &e) || e.Kind != Invalid || e.Field != tc.field {
			t.Errorf("%+v: %v, want invalid %s", tc.req, err, tc.field)
		}
	}
}

// TestJobReadsAuthorization: who may read alice's job's history and the
// states of what it waits for: its team and admins; for another team it
// does not exist.
func TestJobReadsAuthorization(t *testing.T) {
	f := newFixture(t)
	id := f.job(t, false)
	ctx := context.Background()
	for _, tc := range []struct{ actor, want string }{
		{"alice", "ok"}, {"carol", "ok"}, {"visionlead", "ok"}, {"bob", "not found"}, {"nlplead", "not found"}, {"admin", "ok"},
	} {
		a := Actor{User: f.users[tc.actor]}
		h, err := f.app.JobHistory(ctx, a, id)
		if got := outcome(err); got != tc.want {
			t.Errorf("%s: history %s, want %s", tc.actor, got, tc.want)
		} else if err == nil && len(h) == 0 {
			t.Errorf("%s: job %d has no history", tc.actor, id)
		}
		if _, _, err := f.app.DependencyStates(ctx, a, id); outcome(err) != tc.want {
			t.Errorf("%s: dependency states %s, want %s", tc.actor, outcome(err), tc.want)
		}
	}
	if _, err := f.app.JobHistory(ctx, Actor{User: f.users["admin"]}, id+100); KindOf(err) != NotFound {
		t.Errorf("a job that does not exist: %v, want not found", err)
	}
}

// TestActorTeams: an admin submits to and lists any team; anyone else
// their own.
func TestActorTeams(t *testing.T) {
	f := newFixture(t)
	for actor, want := range map[string]string{"alice": "vision", "visionlead": "vision", "bob": "nlp", "admin": "nlp,vision"} {
		ts, err := f.app.ActorTeams(context.Background(), Actor{User: f.users[actor]})
		slices.Sort(ts)
		if got := strings.Join(ts, ","); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", actor, got, err, want)
		}
	}
}
