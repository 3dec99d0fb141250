package engine

import (
	"strings"
	"time"
)

// reasonBook is the wait reasons as the engine last stored them: those
// of the waits of its last recordReasons call that it stored, in that
// call's order. A stored reason counts only while its job is among the
// waits of every call, so the last call's are all the book needs.
//
// Each call looks every wait up. At a long queue a map of the reasons by
// job cost 10,000 lookups a pass, each a cache miss or two (about 1.5
// ms, BenchmarkRecordReasons): the book is read instead in the order of
// the last call's waits, which the next call's mostly keep (the jobs
// ahead leave, new ones join the end), so that most lookups compare the
// next few entries; a job past them is looked for in an index of the
// list, built the first time a call needs it. A job that is in no entry
// (a new wait, most often) is told apart first by the highest job ID of
// the list and a bit set per job (present), which seldom sends it to the
// index.
type reasonBook struct {
	list    []storedReason  // the last call's stored reasons, in its waits' order
	maxID   int64           // the highest job ID in list
	present []uint64        // a bit per job in list, at reasonBit
	index   map[int64]int32 // list's places by job, when indexed
	indexed bool
	// forgot are the jobs whose stored reason the store dropped since the
	// last call (it clears a job's reason when the job starts).
	forgot map[int64]bool

	next  []storedReason // the list the call under way builds
	fresh []int32        // the places in next of the reasons the call stores
}

// storedReason is a wait reason as the engine last stored it.
type storedReason struct {
	id   int64
	text string
	at   time.Time
}

// reasonsAhead is how many entries past the last one found a lookup
// compares before it looks in the index.
const reasonsAhead = 8

// cursor is where a call's lookups are in the book's list.
type cursor struct{ at int }

// find returns job id's stored reason, if it counts: the job was among
// the last call's waits and its reason was stored then or before.
func (b *reasonBook) find(id int64, c *cursor) (storedReason, bool) {
	if len(b.forgot) > 0 && b.forgot[id] {
		return storedReason{}, false
	}
	if id > b.maxID || len(b.present) == 0 || !bitSet(b.present, id) {
		return storedReason{}, false
	}
	for k, end := c.at, min(c.at+reasonsAhead, len(b.list)); k < end; k++ {
		if b.list[k].id == id {
			c.at = k + 1
			return b.list[k], true
		}
	}
	if !b.indexed {
		if b.index == nil {
			b.index = make(map[int64]int32, len(b.list))
		}
		clear(b.index)
		for k := range b.list {
			b.index[b.list[k].id] = int32(k)
		}
		b.indexed = true
	}
	k, ok := b.index[id]
	if !ok {
		return storedReason{}, false
	}
	c.at = int(k) + 1
	return b.list[k], true
}

// keep adds r, unchanged, to the list the call builds.
func (b *reasonBook) keep(r storedReason) { b.next = append(b.next, r) }

// store adds job id's reason, which the call stores, to the list it
// builds; commit gives it its text once stored.
func (b *reasonBook) store(id int64) {
	b.fresh = append(b.fresh, int32(len(b.next)))
	b.next = append(b.next, storedReason{id: id})
}

// commit makes the list the call built the book's: with the reasons it
// stored, at, when stored is set (their texts from changed), else
// without them (the store failed: they are stored again by the next
// call).
func (b *reasonBook) commit(changed map[int64]string, at time.Time, stored bool) {
	if stored {
		for _, k := range b.fresh {
			r := &b.next[k]
			// Its own copy: a pass's reasons share one string (sched.Wait).
			r.text, r.at = strings.Clone(changed[r.id]), at
		}
	} else {
		out, f := b.next[:0], 0
		for k := range b.next {
			if f < len(b.fresh) && int(b.fresh[f]) == k {
				f++
				continue
			}
			out = append(out, b.next[k])
		}
		b.next = out
	}
	b.list, b.next = b.next, b.list[:0]
	clear(b.next[:cap(b.next)]) // keeps no texts of reasons gone
	b.fresh = b.fresh[:0]
	b.indexed = false
	clear(b.forgot)
	b.maxID = 0
	n := 1
	for n*64 < 16*len(b.list) {
		n *= 2
	}
	b.present = resizeBits(b.present, n)
	for k := range b.list {
		id := b.list[k].id
		b.maxID = max(b.maxID, id)
		bit := reasonBit(id, n)
		b.present[bit/64] |= 1 << (bit % 64)
	}
}

// forget drops job id's stored reason: the store dropped it.
func (b *reasonBook) forget(id int64) {
	if b.forgot == nil {
		b.forgot = make(map[int64]bool)
	}
	b.forgot[id] = true
}

// reset forgets every stored reason: the store's may be another
// leader's.
func (b *reasonBook) reset() {
	clear(b.list[:cap(b.list)])
	b.list, b.maxID, b.indexed = b.list[:0], 0, false
	clear(b.present)
	clear(b.forgot)
}

// size is how many stored reasons count.
func (b *reasonBook) size() int {
	n := 0
	for k := range b.list {
		if !b.forgot[b.list[k].id] {
			n++
		}
	}
	return n
}

// reasonBit is job id's bit in a set of n words: IDs hashed (a
// multiplicative hash), so that a set sized by the jobs, not by the span
// of their IDs, tells most absent jobs apart.
func reasonBit(id int64, n int) uint64 {
	return (uint64(id) * 0x9E3779B97F4A7C15 >> 32) % uint64(n*64)
}

func bitSet(bits []uint64, id int64) bool {
	k := reasonBit(id, len(bits))
	return bits[k/64]&(1<<(k%64)) != 0
}

// resizeBits returns bits n words long, every bit clear.
func resizeBits(bits []uint64, n int) []uint64 {
	if cap(bits) < n {
		return make([]uint64, n)
	}
	bits = bits[:n]
	clear(bits)
	return bits
}
