package sched

import "slices"

// walk goes down the priority order once. A pending job starts if it fits
// the free GPUs, or, under a preemptive policy, if it fits once running
// jobs ranked below it are preempted; otherwise it waits, and under fifo
// so does everyone behind it. A running job reached in the order keeps
// its GPUs: no job ranked below it may take them.
//
// The running jobs are sorted and merged into the walk only from the
// first pending job that does not fit the free GPUs: before that, whether
// a running job ranks above or below a pending one changes nothing, and a
// quiet cluster's pass costs no sort of its running jobs.
func (p *pass) walk() {
	p.qpos = resize(p.qpos, p.sc.Queues())
	clear(p.qpos)
	omit := p.sc.cfg.OmitWaits
	if !omit {
		p.d.Waits = make([]Wait, 0, len(p.ents)+len(p.rents)/4)
	}
	p.merged, p.reached, p.restored = false, 0, 0
	defer p.dropRestored()
	var blocker *entry
	for {
		next := p.pending.peek()
		if p.merged {
			p.reach(next)
		}
		if next == nil {
			return
		}
		avail := p.cl.free
		if p.preempt {
			avail += p.cl.reclTotal
		}
		if omit && (avail <= 0 || blocker != nil) {
			return // nothing behind can start
		}
		if blocker != nil {
			p.waitBlocked(p.pending.pop(), blocker)
			continue
		}
		n := int(next.gpus)
		if n > p.cl.free && p.preempt && !p.merged && (!omit || n <= avail) {
			p.merge()
			continue // reach the running jobs ranked above next
		}
		e := p.pending.pop()
		if n <= 0 || n > avail {
			// No placement can help: decide without reading the job.
			p.explain(e, rule{n: n})
		} else {
			r := p.ruleFor(e)
			if p.cl.fits(r) {
				p.start(e, r)
				continue
			}
			if p.preempt {
				if !p.merged {
					p.merge()
					p.reach(e)
				}
				if p.cl.fitsReclaiming(r) && p.reclaim(e, r) {
					p.start(e, r)
					continue
				}
			}
			p.explain(e, r)
		}
		if p.sc.kind == kindFIFO && n > 0 && n <= p.cl.capacity {
			blocker = e // a job that can never run blocks nobody
		}
	}
}

// merge sorts the running jobs into the walk and counts, per node, the
// GPUs they could give up.
func (p *pass) merge() {
	var none QueueState
	for i := range p.rents {
		e := &p.rents[i]
		qs := &none
		if p.sc.kind.queued() {
			qs = &p.qs[e.job]
		}
		p.key(e, &p.s.Jobs[e.job], qs)
	}
	slices.SortFunc(p.rents, func(a, b entry) int { return compareEntries(&a, &b) })
	for i := range p.rents {
		p.runs[p.rents[i].run].ent = int32(i)
	}
	if !p.count {
		clear(p.cl.recl)
		for _, s := range p.held {
			p.cl.recl[p.cl.slotNode[s]]++
		}
		p.cl.frDirty = true
	}
	p.merged = true
}

// reach walks the running jobs ranked above next (all of them when next
// is nil): kept ones keep their GPUs, preempted ones get their Wait.
func (p *pass) reach(next *entry) {
	for p.reached < len(p.rents) {
		e := &p.rents[p.reached]
		if next != nil && compareEntries(e, next) > 0 {
			return
		}
		p.reached++
		r := &p.runs[e.run]
		switch {
		case r.state != runPreempted:
			p.keep(r)
		case p.restore(r):
		default:
			p.waitPreempted(e)
		}
	}
}

// restore takes back the preemption of a job whose GPUs are still free
// when the walk reaches it: a later victim freed more than the jobs in
// between took. So a victim gives way only if, at its own rank, its GPUs
// are wanted, as in the Tiresias simulator's greedy pass.
func (p *pass) restore(r *runJob) bool {
	if p.count {
		if p.cl.free < int(r.n) {
			return false
		}
		p.cl.free -= int(r.n)
	} else {
		for _, s := range p.held[r.lo:r.hi] {
			if p.cl.busy[s] {
				return false
			}
		}
		for _, s := range p.held[r.lo:r.hi] {
			p.cl.busy[s] = true
			n := p.cl.slotNode[s]
			p.cl.setFree(int(n), p.cl.nodes[n].free-1)
		}
		p.cl.frDirty = true
	}
	r.state = runKept
	p.outcome[r.job] = outRunning
	p.d.Preempts[r.preempt].For = restored
	p.restored++
	return true
}

// restored marks a Preempt taken back; such entries are dropped before
// the decisions are returned.
const restored = -1 << 63

// dropRestored removes the preemptions taken back.
func (p *pass) dropRestored() {
	if p.restored == 0 {
		return
	}
	p.d.Preempts = slices.DeleteFunc(p.d.Preempts, func(x Preempt) bool { return x.For == restored })
}

// keep lets a running job keep its GPUs.
func (p *pass) keep(r *runJob) {
	r.state = runKept
	p.cl.reclTotal -= int(r.n)
	if !p.count {
		for _, s := range p.held[r.lo:r.hi] {
			p.cl.recl[p.cl.slotNode[s]]--
		}
		p.cl.frDirty = true
	}
}

// start places a pending job that fits.
func (p *pass) start(e *entry, r rule) {
	var gpus []GPURef
	if p.count {
		p.cl.free -= r.n
	} else {
		gpus = p.cl.place(r)
	}
	p.d.Starts = append(p.d.Starts, Start{JobID: e.id, GPUs: gpus})
	p.outcome[e.job] = outStarted
}

// reclaim looks for running jobs ranked below e whose preemption lets
// rule r fit: the lowest-ranked first, until r fits; then it spares,
// highest-ranked first, every victim r can do without. It preempts the
// victims left and reports whether r now fits.
func (p *pass) reclaim(e *entry, r rule) bool {
	p.victims = p.victims[:0]
	fits := false
	for k := len(p.rents) - 1; k >= p.reached && !fits; k-- {
		ri := p.rents[k].run
		run := &p.runs[ri]
		if run.state != runOpen || run.n == 0 {
			continue
		}
		p.shift(run, +1)
		p.victims = append(p.victims, ri)
		fits = p.cl.fits(r)
	}
	if !fits {
		for _, ri := range p.victims {
			p.shift(&p.runs[ri], -1)
		}
		return false
	}
	for k := len(p.victims) - 1; k >= 0; k-- {
		ri := p.victims[k]
		p.shift(&p.runs[ri], -1)
		if p.cl.fits(r) {
			p.victims[k] = -1 // not needed: spared
			continue
		}
		p.shift(&p.runs[ri], +1)
	}
	for _, ri := range p.victims { // lowest-ranked first
		if ri >= 0 {
			p.preemptRun(ri, e)
		}
	}
	return true
}

// shift frees (+1) or re-occupies (-1) a running job's GPUs in the free
// counts only: a tentative step of reclaim.
func (p *pass) shift(run *runJob, sign int32) {
	if p.count {
		p.cl.free += int(sign * run.n)
		return
	}
	for _, s := range p.held[run.lo:run.hi] {
		n := p.cl.slotNode[s]
		p.cl.setFree(int(n), p.cl.nodes[n].free+sign)
	}
}

// preemptRun commits a victim whose GPUs reclaim already counted free.
func (p *pass) preemptRun(ri int32, by *entry) {
	run := &p.runs[ri]
	run.state = runPreempted
	run.by = by.id
	p.cl.reclTotal -= int(run.n)
	if !p.count {
		for _, s := range p.held[run.lo:run.hi] {
			p.cl.busy[s] = false
			p.cl.recl[p.cl.slotNode[s]]--
		}
		p.cl.frDirty = true
	}
	p.outcome[run.job] = outPreempted
	run.preempt = int32(len(p.d.Preempts))
	victim := &p.rents[run.ent]
	p.d.Preempts = append(p.d.Preempts, Preempt{
		JobID:  victim.id,
		For:    by.id,
		Reason: p.preemptReason(victim, by),
	})
}
