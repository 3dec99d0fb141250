package sched

import (
	"unsafe"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// occupancy is what the running jobs of the last pass held, kept for the
// next under Config.StablePlacements, in nodes placement on plain nodes
// (cluster.plain): each running job's ID, its Placement (the slice
// itself: while the cache holds it, its memory is no other job's) and
// its slots, and the busy slots and free GPUs per node they left.
//
// scan, meeting a running job whose ID and Placement (address and
// length) it finds here, takes its slots from here without reading its
// placement (occHold); the slots of the others it finds in the
// snapshot, as pass.hold does. Once scan is done, occFinish starts from
// the busy slots kept, frees those of the kept jobs scan did not meet
// (ended, preempted) and marks those of the others (started). A GPU two
// running jobs claim makes it build the whole again as pass.hold does
// (occRebuild), for the first claimant to win. What the cache holds for
// a placement is what pass.hold finds for it on the same slots
// (cluster.layout), so the decisions are those of a pass without it.
type occupancy struct {
	ok     bool
	layout uint64    // cluster.layout it was kept on
	runs   []keptRun // the last pass's running jobs, in snapshot order
	next   []keptRun // this pass's, as scan meets them, once apart
	apart  bool      // this pass's runs are no longer the first of runs
	slots  []int32   // the runs' slots: slots[runs[k].lo:runs[k].hi]
	built  int       // runs scan built in this pass
	busy   []bool    // per slot
	free   []int32   // per node
	epoch  uint32    // this pass's: keptRun.seen, once apart
	cur    int       // once apart: kept runs before cur are met or left behind
	found  int       // once apart: kept runs met
	miss   []int32   // this pass's runs not found: their GPUs are not marked yet
}

// keptRun is a running job of occupancy.
type keptRun struct {
	id     int64
	pl     unsafe.Pointer // its Placement's elements (kept alive: no other job's while kept)
	n      int32          // its Placement's length
	lo, hi int32
	seen   uint32 // the epoch of the pass that met it
}

// holds tells whether pl is the placement of k: the same slice, the same
// elements at the same address.
func (k *keptRun) holds(pl []gpu.Ref) bool {
	return int(k.n) == len(pl) && k.pl == unsafe.Pointer(unsafe.SliceData(pl))
}

// occBegin prepares scan to build the runs from the occupancy
// (pass.occDefer), or drops the occupancy when the pass cannot.
func (p *pass) occBegin() {
	o := &p.occ
	p.occDefer = p.sc.cfg.StablePlacements && !p.count && p.cl.plain
	if !p.occDefer {
		o.ok = false
		return
	}
	if !o.ok || o.layout != p.cl.layout {
		o.ok = false
		o.runs, o.slots = o.runs[:0], o.slots[:0]
	}
	o.epoch++
	o.cur, o.found, o.built, o.apart = 0, 0, 0, false
	o.next, o.miss = o.next[:0], o.miss[:0]
	// Until the runs part from the kept ones, their slots are those
	// kept: copied whole, in one move.
	p.held = append(p.held, o.slots...)
}

// occHold records what running job j (at index i) holds, as a new run,
// as pass.hold does, but without marking its GPUs busy (occFinish
// does): from the occupancy if it holds j's placement, else from the
// snapshot.
func (p *pass) occHold(j *Job, i int) *runJob {
	o := &p.occ
	x := o.built
	o.built = x + 1
	if !o.apart && x < len(o.runs) {
		// Met in the kept order so far: the x-th kept run, its slots
		// where occBegin copied them (cur, found and seen are left to
		// occHoldApart and occFinish).
		if k := &o.runs[x]; k.id == j.ID && k.holds(j.Placement) {
			r := p.newRun()
			r.lo, r.hi, r.n, r.ent, r.job = k.lo, k.hi, k.hi-k.lo, -1, int32(i)
			return r
		}
	}
	return p.occHoldApart(j, i, x)
}

// occHoldApart is occHold for run x once the runs of the pass part from
// the kept ones, or as they do.
func (p *pass) occHoldApart(j *Job, i, x int) *runJob {
	o := &p.occ
	if !o.apart {
		// The slots copied for the kept runs from x on go, the first
		// x kept runs are met, and the next pass's list is written out
		// from here (until then it is the first x of runs).
		o.apart = true
		for q := range x {
			o.runs[q].seen = o.epoch
		}
		o.cur, o.found = x, x
		p.held = p.held[:p.heldTo(x)]
		o.next = append(o.next[:0], o.runs[:x]...)
	}
	q := o.cur
	for ; q < len(o.runs); q++ {
		if k := &o.runs[q]; k.id == j.ID && k.holds(j.Placement) {
			break
		}
	}
	lo := int32(len(p.held))
	if q < len(o.runs) {
		k := &o.runs[q]
		k.seen = o.epoch
		o.cur, o.found = q+1, o.found+1
		p.held = append(p.held, o.slots[k.lo:k.hi]...)
	} else {
		o.miss = append(o.miss, int32(x))
		p.held = p.cl.slots(j.Placement, p.held)
	}
	hi := int32(len(p.held))
	o.next = append(o.next, keptRun{})
	k := &o.next[len(o.next)-1]
	k.id, k.pl, k.n, k.lo, k.hi = j.ID, unsafe.Pointer(unsafe.SliceData(j.Placement)), int32(len(j.Placement)), lo, hi
	r := p.newRun()
	r.lo, r.hi, r.n, r.ent, r.job = lo, hi, hi-lo, -1, int32(i)
	return r
}

// heldTo returns where the slots of the first x runs end in held.
func (p *pass) heldTo(x int) int32 {
	if x == 0 {
		return 0
	}
	return p.runs[x-1].hi
}

// slots appends the slots of the GPUs of a placement on plain nodes to
// out, in order, leaving out those the cluster does not have (as
// pass.hold does).
func (c *cluster) slots(pl []gpu.Ref, out []int32) []int32 {
	for _, g := range pl {
		ni := c.lastNode
		if ni < 0 || !sameString(g.Node, c.lastName) {
			var ok bool
			if ni, ok = c.find(g.Node); !ok {
				continue
			}
			c.lastName, c.lastNode = g.Node, ni
		}
		n := &c.nodes[ni]
		if uint(g.Index) >= uint(n.n) {
			continue
		}
		out = append(out, n.first+int32(g.Index))
	}
	return out
}

// occFinish marks the GPUs of the runs scan built from the occupancy
// (pass.occDefer) busy and keeps them for the next pass.
func (p *pass) occFinish() {
	cl, o := &p.cl, &p.occ
	if !o.apart {
		// Scan met the first built kept runs in order: the others are
		// gone, and so are the copies of their runs.
		p.held = p.held[:p.heldTo(o.built)]
		o.cur, o.found = o.built, o.built
	}
	if o.ok {
		copy(cl.busy, o.busy)
		for k := range cl.nodes {
			cl.nodes[k].free = o.free[k]
		}
	} else { // every GPU free (cluster.resetSame leaves them to this)
		clear(cl.busy)
		for k := range cl.nodes {
			cl.nodes[k].free = cl.nodes[k].n
		}
	}
	if o.found < len(o.runs) {
		from := 0
		if !o.apart {
			from = o.built // those before are met, unmarked
		}
		for q := from; q < len(o.runs); q++ {
			k := &o.runs[q]
			if o.apart && k.seen == o.epoch {
				continue
			}
			for _, s := range o.slots[k.lo:k.hi] {
				cl.busy[s] = false
				cl.nodes[cl.slotNode[s]].free++
			}
		}
	}
	for _, ri := range o.miss {
		r := &p.runs[ri]
		for _, s := range p.held[r.lo:r.hi] {
			if cl.busy[s] {
				p.occRebuild()
				return
			}
			cl.busy[s] = true
			cl.nodes[cl.slotNode[s]].free--
		}
	}
	if !o.ok || o.apart || len(p.runs) < len(o.runs) {
		if o.apart {
			o.runs, o.next = o.next, o.runs
		} else { // the first len(p.runs) kept runs, the others gone
			clear(o.runs[len(p.runs):])
			o.runs = o.runs[:len(p.runs)]
		}
		o.slots = append(o.slots[:0], p.held...)
		o.busy = append(o.busy[:0], cl.busy...)
		o.free = resize(o.free, len(cl.nodes))
		for k := range cl.nodes {
			o.free[k] = cl.nodes[k].free
		}
		o.layout = cl.layout
	}
	o.ok = true
}

// occRebuild builds the runs of the running jobs again from the
// snapshot alone, as scan does without the occupancy, when two of them
// claim the same GPU; it keeps nothing for the next pass.
func (p *pass) occRebuild() {
	cl := &p.cl
	p.occ.ok = false
	clear(cl.busy)
	for k := range cl.nodes {
		cl.nodes[k].free = cl.nodes[k].n
	}
	cl.reclTotal = 0
	queued := p.pol.queues != nil
	if queued {
		clear(p.runQ)
		clear(p.runDemQ)
	}
	jobs := p.occ.miss[:0] // borrowed: the runs' jobs, in order
	for k := range p.runs {
		jobs = append(jobs, p.runs[k].job)
	}
	p.runs, p.held, p.shared = p.runs[:0], p.held[:0], p.shared[:0]
	for _, i := range jobs {
		j := &p.s.Jobs[i]
		r := p.hold(j, int(i))
		kept := p.keptClass(j)
		if kept {
			r.state = runKept
		}
		if p.preempt && !kept {
			cl.reclTotal += int(r.n)
			if queued {
				p.runQAdd(i, int(r.n))
			}
		}
	}
	p.occ.miss = jobs[:0]
}
