package sched

import "slices"

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
		q.down(0)
		return
	}
	last := len(q.heap) - 1
	q.heap[0] = q.heap[last]
	q.heap = q.heap[:last]
	if last > 0 {
		q.down(0)
	}
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
	q.heap = append(q.heap, k)
	q.up(len(q.heap) - 1)
}

// newRun returns an empty run for team v, reusing the arrays of runs
// the last pass or this one used up.
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
	for i := len(q.heap)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
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

func (q *laterQueue) less(a, b int32) bool {
	return compareEntries(q.runs[a].head(), q.runs[b].head()) < 0
}

func (q *laterQueue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(q.heap[i], q.heap[parent]) {
			return
		}
		q.heap[i], q.heap[parent] = q.heap[parent], q.heap[i]
		i = parent
	}
}

func (q *laterQueue) down(i int) {
	n := len(q.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.less(q.heap[r], q.heap[l]) {
			m = r
		}
		if !q.less(q.heap[m], q.heap[i]) {
			return
		}
		q.heap[i], q.heap[m] = q.heap[m], q.heap[i]
		i = m
	}
}
