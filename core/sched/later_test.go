package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLaterQueueKeepsEntriesInOrder holds laterQueue to the order
// compareEntries gives: entries deferred by teams (mostly in the walk's
// order, sometimes not), taken one at a time, and teams put back in the
// policy's order (fk 0) as a preemption for a reclaim does, each take
// compared with the least of the entries left. Keys are drawn from few
// values so that ties, broken by the ID, are common; the queue is reused
// from round to round, as a pass reuses it.
func TestLaterQueueKeepsEntriesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		teams     int
		ordered   float64 // chance that an entry comes after its team's last
		take      float64 // chance of a take at each step
		resetting float64 // chance of a team put back at each step
	}{
		{"in the walk's order", 3, 1, 0.2, 0},
		{"out of order", 4, 0.5, 0.3, 0},
		{"teams put back", 3, 0.9, 0.3, 0.05},
		{"one team, all kinds", 1, 0.7, 0.4, 0.1},
		{"many teams", 40, 0.9, 0.3, 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(tc.teams)))
			var q laterQueue
			for round := 0; round < 20; round++ {
				ents := make([]entry, 400)
				factor := make([]float64, tc.teams)
				for v := range factor {
					factor[v] = 1 + float64(rng.IntN(3))/4 // teams share factors at times
				}
				last := make([]*entry, tc.teams)
				var left []*entry
				team := map[*entry]int32{}
				next := 0
				for step := 0; step < 1200; step++ {
					switch r := rng.Float64(); {
					case r < tc.resetting:
						v := int32(rng.IntN(tc.teams))
						want := false
						for _, e := range left {
							if team[e] == v && e.fk != 0 {
								want = true
							}
						}
						if got := q.resetTeam(v); got != want {
							t.Fatalf("round %d step %d: resetTeam(%d) = %v, want %v", round, step, v, got, want)
						}
						for _, e := range left {
							if team[e] == v {
								if e.fk != 0 {
									t.Fatalf("round %d step %d: entry %d of team %d keeps fk %v", round, step, e.id, v, e.fk)
								}
							}
						}
					case r < tc.resetting+tc.take:
						if len(left) == 0 {
							if q.len() != 0 || q.peek() != nil {
								t.Fatalf("round %d step %d: %d entries left in an empty queue", round, step, q.len())
							}
							continue
						}
						least := slices.MinFunc(left, compareEntries)
						if got := q.peek(); got != least {
							t.Fatalf("round %d step %d: peek gives entry %d, want %d", round, step, got.id, least.id)
						}
						q.pop()
						left = slices.DeleteFunc(left, func(e *entry) bool { return e == least })
					default:
						if next == len(ents) {
							continue
						}
						v := int32(rng.IntN(tc.teams))
						e := &ents[next]
						next++
						e.id = int64(next)
						e.k0 = float64(rng.IntN(4))
						if p := last[v]; p != nil && rng.Float64() < tc.ordered {
							e.k0 = p.k0 + float64(rng.IntN(2)) // not before its team's last
						}
						e.fk = 2 - factor[v]
						last[v] = e
						team[e] = v
						q.push(e, v)
						left = append(left, e)
					}
					if q.len() != len(left) {
						t.Fatalf("round %d step %d: len %d, want %d", round, step, q.len(), len(left))
					}
				}
				q.reset()
				if q.len() != 0 || q.peek() != nil {
					t.Fatalf("round %d: reset leaves %d entries", round, q.len())
				}
			}
		})
	}
}
