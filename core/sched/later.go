package sched

import (
	"container/heap"
	"slices"
)

// laterQueue holds the pending entries a pass deferred to the borrowers
// (teamHold), in compareEntries order. They arrive from the walk in its
// order, so each team's come already sorted: the queue keeps them as
// runs, each in ascending order, and a heap of the runs by their first
// entry. Taking the next entry is then a step along a run and a sift
// among a few runs, where one heap of every deferred entry sifted through
// thousands (at 10,000 queued, a tenth of the pass).
//
// An entry that arrives out of its team's order (one taken back from the
// borrowers and deferred again: resetTeam) starts a run of its own.
type laterQueue struct {
	runs []laterRun
	heap []int32 // runs with entries left, by their next entry
	tail []int32 // per team: the run its entries are appended to, or -1
	n    int     // entries left
}

type laterRun struct {
	ents []*entry
	next int // the first entry not taken
	team int32
}

func (r *laterRun) head() *entry { return r.ents[r.next] }
func (r *laterRun) left() bool   { return r.next < len(r.ents) }

// len is the number of entries deferred and not taken.
func (q *laterQueue) len() int { return q.n }

// peek returns the first entry, nil when none is left.
func (q *laterQueue) peek() *entry {
	if len(q.heap) == 0 {
		return nil
	}
	return q.runs[q.heap[0]].head()
}

// pop takes the first entry.
func (q *laterQueue) pop() {
	r := &q.runs[q.heap[0]]
	r.ents[r.next] = nil
	r.next++
	q.n--
	if r.left() {
		heap.Fix(runHeap{q}, 0)
		return
	}
	heap.Pop(runHeap{q})
}

// push defers e, an entry of team v.
func (q *laterQueue) push(e *entry, v int32) {
	q.n++
	if int(v) >= len(q.tail) {
		q.tail = slices.Grow(q.tail, int(v)+1-len(q.tail))
		for len(q.tail) <= int(v) {
			q.tail = append(q.tail, -1)
		}
	}
	if t := q.tail[v]; t >= 0 {
		r := &q.runs[t]
		if r.left() && compareEntries(r.ents[len(r.ents)-1], e) <= 0 {
			r.ents = append(r.ents, e) // its first entry is unchanged
			return
		}
	}
	k := q.newRun(v)
	q.runs[k].ents = append(q.runs[k].ents, e)
	q.tail[v] = k
	heap.Push(runHeap{q}, k)
}

// newRun returns an empty run for team v, reusing the array of a run an
// earlier pass left (reset).
func (q *laterQueue) newRun(v int32) int32 {
	if len(q.runs) < cap(q.runs) {
		q.runs = q.runs[:len(q.runs)+1]
	} else {
		q.runs = append(q.runs, laterRun{})
	}
	k := len(q.runs) - 1
	r := &q.runs[k]
	r.ents, r.next, r.team = r.ents[:0], 0, v
	return int32(k)
}

// resetTeam puts back in the policy's order (fk 0) every entry of team v
// still deferred, and tells whether there was one. Their keys changed, so
// their runs are merged into one and sorted again.
func (q *laterQueue) resetTeam(v int32) bool {
	changed := false
	for i := range q.runs {
		if r := &q.runs[i]; r.team == v {
			for _, e := range r.ents[r.next:] {
				if e.fk != 0 {
					e.fk, changed = 0, true
				}
			}
		}
	}
	if !changed {
		return false
	}
	var k int32 = -1
	for i := range q.runs {
		r := &q.runs[i]
		if r.team != v || !r.left() {
			continue
		}
		if k < 0 {
			k = int32(i)
			if r.next > 0 {
				n := copy(r.ents, r.ents[r.next:])
				clear(r.ents[n:])
				r.ents, r.next = r.ents[:n], 0
			}
			continue
		}
		into := &q.runs[k]
		into.ents = append(into.ents, r.ents[r.next:]...)
		clear(r.ents)
		r.ents, r.next = r.ents[:0], 0
	}
	slices.SortFunc(q.runs[k].ents, compareEntries)
	q.tail[v] = k
	q.heap = q.heap[:0]
	for i := range q.runs {
		if q.runs[i].left() {
			q.heap = append(q.heap, int32(i))
		}
	}
	heap.Init(runHeap{q})
	return true
}

// reset empties the queue, keeping its arrays and no entry.
func (q *laterQueue) reset() {
	for i := range q.runs {
		r := &q.runs[i]
		clear(r.ents[:cap(r.ents)])
		r.ents, r.next = r.ents[:0], 0
	}
	q.runs, q.heap, q.tail, q.n = q.runs[:0], q.heap[:0], q.tail[:0], 0
}

// runHeap is q's runs with entries left, by their next entry, as a
// container/heap: a heap of a few runs (one a team, mostly), sifted once
// per entry taken.
type runHeap struct{ q *laterQueue }

func (h runHeap) Len() int { return len(h.q.heap) }
func (h runHeap) Less(a, b int) bool {
	return compareEntries(h.q.runs[h.q.heap[a]].head(), h.q.runs[h.q.heap[b]].head()) < 0
}
func (h runHeap) Swap(a, b int) { h.q.heap[a], h.q.heap[b] = h.q.heap[b], h.q.heap[a] }
func (h runHeap) Push(x any)    { h.q.heap = append(h.q.heap, x.(int32)) }
func (h runHeap) Pop() any {
	last := len(h.q.heap) - 1
	k := h.q.heap[last]
	h.q.heap = h.q.heap[:last]
	return k
}
