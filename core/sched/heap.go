package sched

// idxHeap is a binary heap of indices into a slice of entries, ordered
// by rank: highest rank (lowest key) on top, or lowest rank on top when
// max is set.
type idxHeap struct {
	ix   []int32
	ents []entry
	max  bool
}

// initRange fills the heap with the indices from..to-1.
func (h *idxHeap) initRange(ents []entry, from, to int, max bool) {
	h.ents, h.max = ents, max
	h.ix = h.ix[:0]
	for i := from; i < to; i++ {
		h.ix = append(h.ix, int32(i))
	}
	for i := len(h.ix)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *idxHeap) len() int { return len(h.ix) }
func (h *idxHeap) less(a, b int32) bool {
	c := compareEntries(&h.ents[a], &h.ents[b])
	if h.max {
		return c > 0
	}
	return c < 0
}

func (h *idxHeap) pop() int32 {
	top := h.ix[0]
	last := len(h.ix) - 1
	h.ix[0] = h.ix[last]
	h.ix = h.ix[:last]
	if last > 0 {
		h.down(0)
	}
	return top
}

func (h *idxHeap) push(i int32) {
	h.ix = append(h.ix, i)
	k := len(h.ix) - 1
	for k > 0 {
		parent := (k - 1) / 2
		if !h.less(h.ix[k], h.ix[parent]) {
			break
		}
		h.ix[k], h.ix[parent] = h.ix[parent], h.ix[k]
		k = parent
	}
}

func (h *idxHeap) down(i int) {
	n := len(h.ix)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(h.ix[r], h.ix[l]) {
			m = r
		}
		if !h.less(h.ix[m], h.ix[i]) {
			return
		}
		h.ix[i], h.ix[m] = h.ix[m], h.ix[i]
		i = m
	}
}
