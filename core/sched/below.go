package sched

// below holds, once the walk has merged the running jobs, those it has
// not reached yet: the jobs that pending jobs may still preempt. The walk
// reaches them from the highest rank down; reclaim takes victims from
// the lowest rank up.
//
// For most policies they are sorted. For the queue policies (dlas,
// tiresias-l) the walk only needs them grouped by queue: a queue's
// running jobs all rank above its pending jobs, so the walk reaches whole
// groups, and only the lowest group's order matters, for picking
// victims, which a heap gives without sorting the group. A congested
// pass then costs O(running jobs), not O(n log n).
type below struct {
	ents    []entry
	grouped bool

	// sorted: ents[next:] not reached yet.
	next   int
	cursor int // reclaim's position, scanning up from the bottom

	// grouped: ents[start[q]:start[q+1]] are the running jobs of queue
	// q; queues before reachedQ are reached.
	start    []int
	reachedQ int
	heaps    []idxHeap // per queue, lowest rank on top, built when needed
	built    []bool
	victimQ  int
	scratch  []entry
	at       []int
	idx      []int32 // sortEntries' scratch
}

// init takes ents[from:], the running jobs ranked below the walk.
func (b *below) init(ents []entry, from int, grouped bool, queues int) {
	b.ents, b.grouped = ents, grouped
	if !grouped {
		sortEntries(ents[from:], &b.idx, &b.scratch)
		b.next = from
		return
	}
	// A counting sort by queue, stable.
	b.start = resize(b.start, queues+1)
	clear(b.start)
	for i := from; i < len(ents); i++ {
		b.start[queueOf(&ents[i], queues)+1]++
	}
	b.start[0] = from
	for q := 1; q <= queues; q++ {
		b.start[q] += b.start[q-1]
	}
	b.scratch = append(b.scratch[:0], ents[from:]...)
	b.at = append(b.at[:0], b.start[:queues]...)
	at := b.at
	for i := range b.scratch {
		q := queueOf(&b.scratch[i], queues)
		ents[at[q]] = b.scratch[i]
		at[q]++
	}
	b.reachedQ = 0
	b.heaps = resize(b.heaps, queues)
	b.built = resize(b.built, queues)
	clear(b.built)
}

func queueOf(e *entry, queues int) int {
	return min(max(int(e.queue), 0), queues-1)
}

// reach appends to out the entries ranked above next, in rank order for
// sorted sets and group by group for grouped ones.
func (b *below) reach(next *entry, out []int32) []int32 {
	if !b.grouped {
		for b.next < len(b.ents) && compareEntries(&b.ents[b.next], next) < 0 {
			out = append(out, int32(b.next))
			b.next++
		}
		return out
	}
	last := min(int(next.queue), len(b.start)-2)
	for ; b.reachedQ <= last; b.reachedQ++ {
		for i := b.start[b.reachedQ]; i < b.start[b.reachedQ+1]; i++ {
			out = append(out, int32(i))
		}
	}
	return out
}

// startVictims begins a search for victims, lowest rank first.
func (b *below) startVictims() {
	b.cursor = len(b.ents) - 1
	b.victimQ = len(b.start) - 2
}

// nextVictim returns the next candidate that ok accepts, or -1.
func (b *below) nextVictim(ok func(int32) bool) int32 {
	if !b.grouped {
		for ; b.cursor >= b.next; b.cursor-- {
			if ok(int32(b.cursor)) {
				b.cursor--
				return int32(b.cursor + 1)
			}
		}
		return -1
	}
	for ; b.victimQ >= b.reachedQ; b.victimQ-- {
		q := b.victimQ
		h := &b.heaps[q]
		if !b.built[q] {
			b.built[q] = true
			h.initRange(b.ents, b.start[q], b.start[q+1], true)
		}
		for h.len() > 0 {
			if i := h.pop(); ok(i) {
				return i
			}
		}
	}
	return -1
}

// putBack returns a candidate that was not preempted after all.
func (b *below) putBack(i int32) {
	if b.grouped {
		b.heaps[queueOf(&b.ents[i], len(b.heaps))].push(i)
	}
}
