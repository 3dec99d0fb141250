package sched

import "slices"

// stream yields entries in priority order: from a sorted slice, or, when
// only the head of the order matters (no explanations wanted), from a
// heap, so that a pass that stops early does not pay for a full sort.
// Entries it yields stay in place until the pass ends.
type stream struct {
	ents []entry
	heap bool
	next int // sorted: the next entry; heap: entries still in the heap

	order resort // the last pass's order, to sort from
}

func (s *stream) init(ents []entry, lazy bool) {
	s.ents, s.heap = ents, lazy
	if !lazy {
		s.order.sort(ents)
		s.next = 0
		return
	}
	s.next = len(ents)
	for i := s.next/2 - 1; i >= 0; i-- {
		s.down(i)
	}
}

// sortEntries orders ents by compareEntries. It sorts their positions,
// then moves each entry once: sorting the entries themselves copies two
// of them for every comparison and swap. The order is the one
// slices.SortFunc gives the entries, ties included: pdqsort makes the
// same comparisons and swaps whatever it sorts. idx and scratch are
// reused from call to call.
func sortEntries(ents []entry, idx *[]int32, scratch *[]entry) {
	pos := resize(*idx, len(ents))
	for i := range pos {
		pos[i] = int32(i)
	}
	slices.SortFunc(pos, func(x, y int32) int { return compareEntries(&ents[x], &ents[y]) })
	*scratch = append((*scratch)[:0], ents...)
	for i, k := range pos {
		ents[i] = (*scratch)[k]
	}
	*idx = pos
}

// peek returns the next entry without taking it, or nil.
func (s *stream) peek() *entry {
	if s.heap {
		if s.next == 0 {
			return nil
		}
		return &s.ents[0]
	}
	if s.next == len(s.ents) {
		return nil
	}
	return &s.ents[s.next]
}

// pop takes the next entry; the stream must not be empty. A popped heap
// entry moves behind the heap, where later pops do not touch it.
func (s *stream) pop() *entry {
	if !s.heap {
		s.next++
		return &s.ents[s.next-1]
	}
	s.next--
	s.ents[0], s.ents[s.next] = s.ents[s.next], s.ents[0]
	s.down(0)
	return &s.ents[s.next]
}

func (s *stream) down(i int) {
	h := s.ents[:s.next]
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && compareEntries(&h[r], &h[l]) < 0 {
			m = r
		}
		if compareEntries(&h[m], &h[i]) >= 0 {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
