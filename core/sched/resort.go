package sched

import "slices"

// resort orders the pending entries of a pass as sortEntries does, from
// the order of the last pass: the entries whose job and keys it met last
// time keep their relative order (compareEntries is a total order on the
// keys and the ID), so only the others are sorted, and the two runs are
// merged. At a long queue most waiting jobs' keys do not change from one
// pass to the next, so a pass costs O(n + k log k) for k changed entries,
// not O(n log n).
//
// It remembers the last order only while the entries come in ascending
// job ID, as snapshots list them (the engine's by ID, the simulator's by
// arrival), so that they are matched with the last pass's by one merge
// of the two lists rather than a map. Otherwise it sorts them all.
type resort struct {
	// The last call's entries in their input order (ascending ID): each
	// one's ID, keys, and rank in the order it was given.
	ids  []int64
	keys []sortKey
	rank []int32

	slot    []int32 // by last rank: the input position of an unchanged entry, or -1
	moved   []int32 // input positions of entries new or changed since
	kept    []int32 // unchanged entries' input positions, in their last order
	pos     []int32 // the order: input positions by rank
	scratch []entry
}

// sortKey is what compareEntries reads of an entry besides its ID.
type sortKey struct {
	fk, k0, k1, k2, k3 float64
	uk                 int32
}

func keyOf(e *entry) sortKey { return sortKey{e.fk, e.k0, e.k1, e.k2, e.k3, e.uk} }

// sort orders ents by compareEntries, in place.
func (r *resort) sort(ents []entry) {
	if !ascendingIDs(ents) {
		sortEntries(ents, &r.pos, &r.scratch)
		r.ids = r.ids[:0] // nothing to match next time
		return
	}
	n := len(ents)
	r.pos = resize(r.pos, n)
	if len(r.ids) == 0 {
		for i := range r.pos {
			r.pos[i] = int32(i)
		}
		slices.SortFunc(r.pos, func(x, y int32) int { return compareEntries(&ents[x], &ents[y]) })
	} else {
		r.merge(ents)
	}
	r.remember(ents)
	r.scratch = append(r.scratch[:0], ents...)
	for i, k := range r.pos {
		ents[i] = r.scratch[k]
	}
}

// merge fills r.pos from the last order: unchanged entries in their last
// order, the others sorted, the two merged.
func (r *resort) merge(ents []entry) {
	r.slot = resize(r.slot, len(r.ids))
	for i := range r.slot {
		r.slot[i] = -1
	}
	r.moved = r.moved[:0]
	j := 0
	for i := range ents {
		e := &ents[i]
		for j < len(r.ids) && r.ids[j] < e.id {
			j++
		}
		if j < len(r.ids) && r.ids[j] == e.id && r.keys[j] == keyOf(e) {
			r.slot[r.rank[j]] = int32(i)
			continue
		}
		r.moved = append(r.moved, int32(i))
	}
	r.kept = r.kept[:0]
	for _, i := range r.slot {
		if i >= 0 {
			r.kept = append(r.kept, i)
		}
	}
	slices.SortFunc(r.moved, func(x, y int32) int { return compareEntries(&ents[x], &ents[y]) })
	a, b := r.kept, r.moved
	out := r.pos[:0]
	for len(a) > 0 && len(b) > 0 {
		if compareEntries(&ents[b[0]], &ents[a[0]]) < 0 {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	out = append(append(out, a...), b...)
	r.pos = out
}

// remember keeps ents (in input order) and their ranks in r.pos.
func (r *resort) remember(ents []entry) {
	n := len(ents)
	r.ids, r.keys, r.rank = resize(r.ids, n), resize(r.keys, n), resize(r.rank, n)
	for i := range ents {
		r.ids[i], r.keys[i] = ents[i].id, keyOf(&ents[i])
	}
	for rk, i := range r.pos {
		r.rank[i] = int32(rk)
	}
}

// ascendingIDs tells whether ents come in strictly ascending job ID.
func ascendingIDs(ents []entry) bool {
	for i := 1; i < len(ents); i++ {
		if ents[i].id <= ents[i-1].id {
			return false
		}
	}
	return true
}
