package app

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
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

// reservingEngine is an engine whose last pass kept rs.
type reservingEngine struct {
	*fakeEngine
	rs []sched.Reservation
}

func (e reservingEngine) Reservations() []sched.Reservation { return e.rs }

// TestFollowerReservedGPUs (issue 30): the cluster page marks the GPUs
// reserved, and for which job, from App.Reservations: on a follower
// replica, which runs no engine, the reservations the leader stored
// (table reservations), in the leader's order; on the leader its
// engine's. The GPUs each marks are engine.ReservedGPUsOf's, the one
// computation for both.
func TestFollowerReservedGPUs(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	first, second := f.job(t, false), f.job(t, false)
	const fromS, dueS = 1_900_000_000, 1_899_999_880
	rows := []models.Reservation{
		{JobID: second, Seq: 0, GPUs: `["node-1:6","node-1:7"]`, Count: 2, FromS: fromS, DueS: dueS},
		{JobID: first, Seq: 1, GPUs: `["node-0:0","node-0:1","node-0:2"]`, Count: 3, FromS: fromS + 60, DueS: dueS},
		{JobID: 999, Seq: 2, Count: 4, FromS: fromS, DueS: dueS}, // by count: no GPU marked
	}
	if err := f.store.SetReservations(ctx, rows); err != nil {
		t.Fatal(err)
	}
	from := time.Unix(fromS, 0).Local()
	leaders := []sched.Reservation{{JobID: first, GPUs: []gpu.Ref{{Node: "node-2", Index: 3}}, Count: 1, FromS: fromS, DueS: dueS}}
	f.app.cfg.Engine = reservingEngine{fakeEngine: f.app.cfg.Engine.(*fakeEngine), rs: leaders}
	for _, tc := range []struct {
		name      string
		leading   bool
		wantOrder []int64
		want      map[string]engine.ReservedGPU
	}{
		{"follower: the stored ones", false, []int64{second, first, 999}, map[string]engine.ReservedGPU{
			"node-1:6": {JobID: second, From: from}, "node-1:7": {JobID: second, From: from},
			"node-0:0": {JobID: first, From: from.Add(time.Minute)}, "node-0:1": {JobID: first, From: from.Add(time.Minute)},
			"node-0:2": {JobID: first, From: from.Add(time.Minute)},
		}},
		{"leader: its engine's", true, []int64{first}, map[string]engine.ReservedGPU{"node-2:3": {JobID: first, From: from}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.app.cfg.Leader = func() bool { return tc.leading }
			rs, err := f.app.Reservations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var order []int64
			for _, r := range rs {
				order = append(order, r.JobID)
			}
			if !reflect.DeepEqual(order, tc.wantOrder) {
				t.Errorf("reservations of jobs %v, want %v", order, tc.wantOrder)
			}
			if got := engine.ReservedGPUsOf(rs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reserved GPUs %v, want %v", got, tc.want)
			}
		})
	}
}
