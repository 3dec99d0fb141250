package app

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// TestFollowerShowsStoredReservation (issue 30): a follower replica runs
// no engine, so it shows a waiting job's reservation as the leader stored
// it (table reservations): the same GPUs, count, "from" and "due" in the
// API's job and on its page, whether read with the whole queue (Moment)
// or alone (ShownMoment). The leader asks its engine, which here holds
// none, and a running job shows none.
func TestFollowerShowsStoredReservation(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	waiting, running := f.job(t, false), f.job(t, true)
	const fromS, dueS = 1_900_000_000.5, 1_899_999_880
	rows := []models.Reservation{
		{JobID: waiting, GPUs: `["node-0:0","node-0:1"]`, Count: 2, FromS: fromS, DueS: dueS},
		{JobID: running, GPUs: `["node-0:2"]`, Count: 1, FromS: fromS, DueS: dueS},
	}
	if err := f.store.SetReservations(ctx, rows); err != nil {
		t.Fatal(err)
	}
	want := &api.Reservation{GPUs: []string{"node-0:0", "node-0:1"}, Count: 2,
		From: time.Unix(1_900_000_000, 5e8).Local(), Due: time.Unix(dueS, 0).Local()}
	for _, tc := range []struct {
		name    string
		leading bool
		id      int64
		want    *api.Reservation
	}{
		{"follower, waiting", false, waiting, want},
		{"follower, running", false, running, nil},
		{"leader: its engine's, none", true, waiting, nil},
	} {
		f.app.cfg.Leader = func() bool { return tc.leading }
		v, err := f.app.Job(ctx, Actor{User: f.users["alice"]}, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := f.app.Moment(ctx)
		if err != nil {
			t.Fatal(err)
		}
		shown, err := f.app.ShownMoment(ctx, *v)
		if err != nil {
			t.Fatal(err)
		}
		for which, m := range map[string]*Moment{"Moment": whole, "ShownMoment": shown} {
			if got := f.app.JobOf(m, v).Reservation; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s, %s: reservation %+v, want %+v", tc.name, which, got, tc.want)
			}
		}
	}
}
