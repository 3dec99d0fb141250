package sched

import "slices"

// resort orders the pending entries of a pass as sortEntries does, from
// the order of the last pass: the entries it met last time are taken in
// the order they had then, those now out of order with the entries kept
// before them or with the next one (their keys changed) are taken out,
// sorted with the new entries, and the two runs merged. compareEntries
// is a total order (keys, then ID), so the result is the one order a
// full sort gives. At a long queue few waiting jobs move from one pass
// to the next: a job ahead that leaves shifts the keys of those behind
// it in its team (userOrder hands out key slots) without changing their
// order. A pass then costs O(n) comparisons and O(k log k) for k moved
// entries, not O(n log n).
//
// It remembers the last order only while the entries come in ascending
// job ID, as snapshots list them (the engine's by ID, the simulator's by
// arrival), so that they are matched with the last pass's by one merge
// of the two lists rather than a map. Otherwise it sorts them all.
type resort struct {
	// The last call's entries in their input order (ascending ID): each
	// one's ID and its rank in the order it was given.
	ids  []int64
	rank []int32

	slot    []int32 // by last rank: the input position of an entry met again, or -1
	moved   []int32 // input positions of entries new or out of order
	kept    []int32 // entries met again and still in order, in their order
	pos     []int32 // the order: input positions by rank
	scratch []entry
}

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

// merge fills r.pos from the last order: the entries met again that are
// still in order, in that order, and the others sorted, merged.
func (r *resort) merge(ents []entry) {
	r.slot = resize(r.slot, len(r.ids))
	for i := range r.slot {
		r.slot[i] = -1
	}
	r.moved = r.moved[:0]
	j := 0
	for i := range ents {
		id := ents[i].id
		for j < len(r.ids) && r.ids[j] < id {
			j++
		}
		if j < len(r.ids) && r.ids[j] == id {
			r.slot[r.rank[j]] = int32(i)
			continue
		}
		r.moved = append(r.moved, int32(i))
	}
	// The entries met again, in their last order: one is kept if it
	// follows the last kept and precedes the next (else it, or the next,
	// moved; both may be taken out, which costs only their sort).
	cand := slices.DeleteFunc(r.slot, func(i int32) bool { return i < 0 })
	r.kept = r.kept[:0]
	last := int32(-1)
	for k, i := range cand {
		if last >= 0 && compareEntries(&ents[last], &ents[i]) >= 0 ||
			k+1 < len(cand) && compareEntries(&ents[i], &ents[cand[k+1]]) > 0 {
			r.moved = append(r.moved, i)
			continue
		}
		r.kept = append(r.kept, i)
		last = i
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

// remember keeps ents' IDs (in input order) and their ranks in r.pos,
// for the next call.
func (r *resort) remember(ents []entry) {
	n := len(ents)
	r.ids, r.rank = resize(r.ids, n), resize(r.rank, n)
	for i := range ents {
		r.ids[i] = ents[i].id
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
