package models_test

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

// sortedQueues is the queues' order rule written as one stable sort:
// running first, then by position, then those of none by entry; each
// row in the queue place gives it, clamped.
func sortedQueues(rows []models.QueueRow, n int, place func(*models.QueueRow) (int, int)) [][]*models.QueueRow {
	ps := make([]*models.QueueRow, len(rows))
	for i := range rows {
		ps[i] = &rows[i]
	}
	sort.SliceStable(ps, func(a, b int) bool {
		ra, rb := ps[a].State == models.JobRunning, ps[b].State == models.JobRunning
		if ra != rb {
			return ra
		}
		_, pa := place(ps[a])
		_, pb := place(ps[b])
		if ra {
			pa, pb = 0, 0
		}
		if (pa > 0) != (pb > 0) {
			return pa > 0
		}
		if pa != pb {
			return pa < pb
		}
		return ps[a].Entered() < ps[b].Entered()
	})
	out := make([][]*models.QueueRow, n)
	for _, r := range ps {
		qi, _ := place(r)
		qi = min(max(qi, 0), n-1)
		out[qi] = append(out[qi], r)
	}
	return out
}

// TestOrderQueues checks that OrderQueues, which places positions by
// number, orders as one stable sort by the rule does: queues of jobs
// running, waiting with positions from one pass (some since gone or
// started), without one, in queues out of range, entered at the same
// second; and positions that clash, which no one pass gives.
func TestOrderQueues(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		jobs   int
		queues int
		clash  bool
	}{
		{"empty", 0, 1, false},
		{"one queue", 50, 1, false},
		{"three queues", 500, 3, false},
		{"positions that clash", 200, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.jobs), 7))
			rows := make([]models.QueueRow, tc.jobs)
			type where struct{ queue, pos int }
			places := make(map[int64]where)
			next := make([]int, tc.queues+1)
			for i := range rows {
				r := &rows[i]
				r.ID = int64(i + 1)
				r.QueueIndex = rng.IntN(tc.queues + 1) // one past the last counts as the last
				r.SubmittedAt = at.Add(time.Duration(rng.IntN(tc.jobs/2+1)) * time.Second)
				if rng.IntN(3) == 0 {
					r.QueueSince = float64(at.Unix() + int64(rng.IntN(100)))
				}
				switch k := rng.IntN(10); {
				case k == 0:
					r.State = models.JobRunning
				case k == 1:
					r.State = models.JobPreempted
				default:
					r.State = models.JobQueued
				}
				if rng.IntN(5) > 0 { // the last pass placed it
					q := rng.IntN(tc.queues)
					next[q]++
					places[r.ID] = where{q, next[q]}
				}
			}
			rng.Shuffle(len(rows), func(a, b int) { // positions in no order of IDs
				pa, pb := places[rows[a].ID], places[rows[b].ID]
				places[rows[a].ID], places[rows[b].ID] = pb, pa
			})
			if tc.clash {
				for id, w := range places {
					if id%7 == 0 && w.pos > 1 {
						places[id] = where{w.queue, w.pos - 1}
					}
				}
			}
			place := func(r *models.QueueRow) (int, int) {
				if w, ok := places[r.ID]; ok && w.pos > 0 && r.State != models.JobRunning {
					return w.queue, w.pos
				}
				return r.QueueIndex, 0
			}
			got := models.OrderQueues(rows, tc.queues, place)
			want := sortedQueues(rows, tc.queues, place)
			if len(got) != tc.queues {
				t.Fatalf("%d queues, want %d", len(got), tc.queues)
			}
			total := 0
			for qi := range want {
				ids := func(rs []*models.QueueRow) []int64 {
					out := make([]int64, len(rs))
					for i, r := range rs {
						out[i] = r.ID
					}
					return out
				}
				if g, w := ids(got[qi]), ids(want[qi]); !slices.Equal(g, w) {
					t.Errorf("queue %d: %v\nwant %v", qi, g, w)
				}
				total += len(got[qi])
			}
			if total != tc.jobs {
				t.Errorf("%d jobs placed, want %d", total, tc.jobs)
			}
		})
	}
}
