package app

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
)

// The queues' order is kept while the store's rows and the engine's
// places are the same ones, and computed again when either is replaced
// or the number of queues changes; a team's jobs follow the order kept.
func TestOrderCacheFollowsRowsAndPlaces(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	rows := []models.QueueRow{
		{ID: 1, Team: "vision", State: models.JobQueued, SubmittedAt: at},
		{ID: 2, Team: "nlp", State: models.JobQueued, SubmittedAt: at.Add(time.Second)},
		{ID: 3, Team: "vision", State: models.JobQueued, SubmittedAt: at.Add(2 * time.Second)},
	}
	places := func(ids ...int64) map[int64]sched.Wait {
		out := make(map[int64]sched.Wait)
		for i, id := range ids {
			out[id] = sched.Wait{JobID: id, Position: i + 1}
		}
		return out
	}
	ids := func(order [][]*models.QueueRow) []int64 {
		var out []int64
		for _, q := range order {
			for _, r := range q {
				out = append(out, r.ID)
			}
		}
		return out
	}
	var c orderCache
	first := &Moment{queued: rows, Waits: places(3, 1, 2), orders: &c}
	kept := first.queueOrder(1)
	for _, tc := range []struct {
		name     string
		m        *Moment
		n        int
		computed bool
		want     []int64
		vision   []int64
	}{
		{"same rows and places", &Moment{queued: rows, Waits: first.Waits, orders: &c}, 1, false, []int64{3, 1, 2}, []int64{3, 1}},
		{"a new pass, the same places", &Moment{queued: rows, Waits: places(3, 1, 2), orders: &c}, 1, true, []int64{3, 1, 2}, []int64{3, 1}},
		{"a new pass, new places", &Moment{queued: rows, Waits: places(2, 1, 3), orders: &c}, 1, true, []int64{2, 1, 3}, []int64{1, 3}},
		{"rows read again", &Moment{queued: slices.Clone(rows), Waits: first.Waits, orders: &c}, 1, true, []int64{3, 1, 2}, []int64{3, 1}},
		{"two queues", &Moment{queued: rows, Waits: first.Waits, orders: &c}, 2, true, []int64{3, 1, 2}, []int64{3, 1}},
		{"no places (a follower)", &Moment{queued: rows, orders: &c}, 1, true, []int64{1, 2, 3}, []int64{1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.order
			order := tc.m.queueOrder(tc.n)
			if computed := &order[0] != &before[0]; computed != tc.computed {
				t.Errorf("computed again: %v, want %v", computed, tc.computed)
			}
			if got := ids(order); !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
			page, total := tc.m.TeamQueue("vision", tc.n, 1)
			if total != len(tc.vision) || len(page) != 1 || page[0].ID != tc.vision[0] {
				t.Errorf("vision's queue: %+v of %d, want the first of %v", page, total, tc.vision)
			}
		})
	}
	if ids(kept)[0] != 3 {
		t.Errorf("an order handed out changed: %v", ids(kept))
	}
}
