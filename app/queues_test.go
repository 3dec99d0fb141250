package app

import (
	"context"
	"testing"
	"time"
)

// TestQueuesShowOtherTeamsJobsWithoutNames: everyone sees every queued
// job and its figures; only its team and admins see its name, user and
// reason.
func TestQueuesShowOtherTeamsJobsWithoutNames(t *testing.T) {
	f := newFixture(t)
	id := f.job(t, false)
	for _, tc := range []struct {
		actor string
		named bool
	}{
		{"alice", true},      // owner
		{"carol", true},      // teammate
		{"visionlead", true}, // lead
		{"bob", false},       // other team
		{"nlplead", false},   // other team's lead
		{"admin", true},
	} {
		t.Run(tc.actor, func(t *testing.T) {
			q, err := f.app.Queues(context.Background(), Actor{User: f.users[tc.actor]}, QueuePage{Queue: -1, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(q.Queues) == 0 || len(q.Queues[0].Jobs) != 1 || q.Queues[0].Total != 1 {
				t.Fatalf("queues %+v: want job %d in queue 0", q.Queues, id)
			}
			j := q.Queues[0].Jobs[0]
			if j.ID != id || j.Team != "vision" || j.GPUs != 1 {
				t.Errorf("queue entry %+v", j)
			}
			if named := j.Name != "" || j.User != "" || j.Reason != ""; named != tc.named {
				t.Errorf("name %q, user %q, reason %q: named %v, want %v", j.Name, j.User, j.Reason, named, tc.named)
			}
		})
	}
}

// TestJCTStatsWindow: the window is bounded; outside the bounds it is an
// invalid request naming it.
func TestJCTStatsWindow(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		window time.Duration
		want   string
	}{
		{time.Hour, "ok"}, {MaxJCTWindow, "ok"}, {0, "invalid"}, {-time.Hour, "invalid"}, {MaxJCTWindow + time.Second, "invalid"},
	} {
		_, err := f.app.JCTStats(context.Background(), tc.window)
		if got := outcome(err); got != tc.want {
			t.Errorf("window %v: %s, want %s", tc.window, got, tc.want)
		}
		if err != nil && KindOf(err) == Invalid && err.(*Error).Field != "window" {
			t.Errorf("window %v: field %q", tc.window, err.(*Error).Field)
		}
	}
}
