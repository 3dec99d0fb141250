package sched

import (
	"slices"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// walk goes down the priority order once. A pending job starts if it fits
// the free GPUs, or, under a preemptive policy, if it fits once running
// jobs ranked below it are preempted; otherwise it waits, and under fifo
// so does everyone behind it. A running job reached in the order keeps
// its GPUs: no job ranked below it may take them.
//
// The running jobs are sorted and merged into the walk only once a
// pending job could start by preempting some: before that, whether a
// running job ranks above or below a pending one changes nothing but the
// count of GPUs that preemption could free (see reclaimable), and a
// pass, quiet or congested, that preempts nobody sorts no running job.
func (p *pass) walk() {
	p.qpos = resize(p.qpos, p.sc.Queues())
	clear(p.qpos)
	omit := p.sc.cfg.OmitWaits
	if !omit {
		p.d.Waits = make([]Wait, 0, len(p.ents)+len(p.rents)/4)
	}
	p.merged, p.restored, p.counted = false, 0, false
	p.preempted = p.preempted[:0]
	defer p.dropRestored()
	defer p.closeReserved()
	defer p.rsvEarlyRelease()
	defer p.unmask()
	p.rsvEarlyBegin()
	var blocker *entry
	for {
		p.unmask()
		p.rsvEarlyRelease()
		p.closeReserved()
		next := p.peek()
		if p.merged {
			p.reach(next)
		}
		if next == nil {
			return
		}
		if blocker != nil {
			if omit {
				return // nothing behind can start
			}
			p.waitBlocked(p.pop(next), blocker)
			continue
		}
		if p.teams {
			switch p.teamHold(next) {
			case teamHeld:
				continue
			case teamReserveOnly:
				p.reserveOnly(next)
				continue
			}
			if len(p.rsvWithin) > 0 { // sized in this pass (rsvBegin), not an earlier one's
				p.rsvWithin[next.job] = p.entitled(next)
			}
		}
		p.rsvEarlyHold(next)
		p.mask(next)
		if p.sh.on && p.tryJoin(next) {
			continue
		}
		if p.rsvFree > 0 {
			p.openReserved(next)
		}
		n := int(next.gpus)
		reclaimable := 0
		if n > p.cl.free {
			reclaimable = p.reclaimable(next)
		}
		if omit && p.cl.free+p.maskedFree+reclaimable <= 0 && !p.fair && !p.sh.on && !p.rsvMayOpen() && !p.rsvWalkOn() {
			return // nothing behind can start
		}
		e := p.pop(next)
		var cause WaitCause
		if n <= 0 || n > p.cl.free+reclaimable {
			// No placement can help: decide without reading the job.
			if p.rsvOn && p.tryReserve(e) {
				continue
			}
			r := rule{n: n}
			cause = p.explain(e, r, p.cl.refusal(r, reclaimable), reclaimable)
		} else {
			r := p.ruleFor(e)
			if p.cl.fits(r) {
				p.start(e, r)
				continue
			}
			if p.preempt {
				if !p.merged {
					p.merge(e)
				}
				if p.cl.fitsReclaiming(r) && p.reclaim(e, r) {
					p.start(e, r)
					continue
				}
				if p.fair {
					reclaimable = p.fairBound(e)
				} else {
					reclaimable = p.cl.reclTotal
				}
			}
			if p.rsvOn && p.tryReserve(e) {
				continue
			}
			cause = p.explain(e, r, p.cl.refusal(r, reclaimable), reclaimable)
		}
		p.rsvCommit()
		if p.fair && !p.lendStop && cause != WaitTooLarge && cause != WaitInvalid && p.entitled(e) && len(p.rsvEarlyHeld) == 0 {
			// Its team has room for it: lend nothing until it starts
			// (docs/fair-share.md). Unless free GPUs were held off it
			// for a reservation past its deadline (rsvEarlyHold): its
			// team lends them to that job, a borrower, which would
			// else never start, and the GPUs idle.
			p.lendStop, p.lendBy = true, e.job
		}
		if p.pol.blocks && n > 0 && n <= p.cl.capacity-p.maskedCap {
			blocker = e // a job that can never run blocks nobody
		}
	}
}

// reclaimable returns how many GPUs preempting every running job ranked
// below pending entry e would free. Once merged, that is reclTotal. Before,
// the queue policies read it from per-queue sums: every running job of a
// queue ranks above the queue's pending jobs. Other policies count it
// once by comparing e with every running job, then merge. Under the
// reference's list order (runningFirstUnlessDemoted) the running jobs of
// e's queue rank above it but those demoted in the pass.
func (p *pass) reclaimable(e *entry) int {
	switch {
	case !p.preempt:
		return 0
	case p.fair:
		return p.fairBound(e)
	case p.merged:
		return p.cl.reclTotal
	case p.pol.runningFirstInQueue || p.pol.runningFirstUnlessDemoted:
		sum := 0
		for q := int(e.queue) + 1; q < len(p.runQ); q++ {
			sum += p.runQ[q]
		}
		if p.pol.runningFirstUnlessDemoted {
			sum += p.runDemQ[min(max(int(e.queue), 0), len(p.runQ)-1)]
		}
		return sum
	case !p.counted:
		p.counted = true
		p.keyRunning()
		sum := 0
		for i := range p.rents {
			if p.runs[p.rents[i].run].state == runOpen && compareEntries(&p.rents[i], e) > 0 {
				sum += int(p.runs[p.rents[i].run].n)
			}
		}
		return sum
	}
	p.merge(e)
	return p.cl.reclTotal
}

// merge brings the running jobs into the walk at pending entry e. Those
// ranked above e keep their GPUs at once, in no particular order; those
// below go to p.below. merge also counts, per node, the GPUs that
// preemption could free.
func (p *pass) merge(e *entry) {
	p.keyRunning()
	above := 0
	for k := range p.rents {
		if compareEntries(&p.rents[k], e) < 0 {
			p.rents[above], p.rents[k] = p.rents[k], p.rents[above]
			above++
		}
	}
	if !p.count {
		clear(p.cl.recl)
		for i := range p.runs {
			if r := &p.runs[i]; r.state == runOpen { // not pinned (share.go)
				for _, s := range p.held[r.lo:r.hi] {
					p.cl.recl[p.cl.slotNode[s]]++
				}
			}
		}
		p.cl.frDirty = true
	}
	for i := range above {
		if r := &p.runs[p.rents[i].run]; r.state == runOpen {
			p.keep(r)
		}
	}
	grouped := p.pol.runningFirstInQueue && !p.fair
	p.below.init(p.rents, above, grouped, p.sc.Queues())
	for i := range p.rents {
		p.runs[p.rents[i].run].ent = int32(i)
	}
	p.merged = true
}

// keyRunning computes the sort keys of the running jobs, once.
func (p *pass) keyRunning() {
	if p.keyed {
		return
	}
	p.keyed = true
	p.running()
	none := &p.noQueue
	for i := range p.rents {
		e := &p.rents[i]
		qs := none
		if p.pol.queues != nil {
			qs = &p.qs[e.job]
		}
		p.key(e, &p.s.Jobs[e.job], qs)
	}
}

// reach walks the running jobs ranked above next: kept ones keep their
// GPUs; a preempted one, in rank order, is restored if its GPUs are
// still free, or gets its Wait. At the end of the walk (next nil) only
// the preempted ones matter.
func (p *pass) reach(next *entry) {
	if next == nil {
		p.reachPreempted()
		return
	}
	reached := p.below.reach(next, p.reachBuf[:0])
	late := p.victims[:0]
	for _, i := range reached {
		r := &p.runs[p.rents[i].run]
		if r.state == runOpen {
			p.keep(r)
		} else if r.state == runPreempted {
			late = append(late, i)
		}
		r.state |= runReached
	}
	p.reachBuf = reached
	p.reachLate(late)
}

// reachLate reaches preempted entries, sorting them into rank order.
func (p *pass) reachLate(late []int32) {
	slices.SortFunc(late, func(a, b int32) int { return compareEntries(&p.rents[a], &p.rents[b]) })
	for _, i := range late {
		e := &p.rents[i]
		r := &p.runs[e.run]
		if !p.restore(r) {
			p.waitPreempted(e)
		}
		r.state |= runReached
	}
}

// reachPreempted reaches, in order, the preempted jobs the walk has not
// reached yet.
func (p *pass) reachPreempted() {
	late := p.victims[:0]
	for _, ri := range p.preempted {
		if p.runs[ri].state == runPreempted {
			late = append(late, p.runs[ri].ent)
		}
	}
	p.reachLate(late)
}

// restore takes back the preemption of a job whose GPUs are still free
// when the walk reaches it: a later victim freed more than the jobs in
// between took. So a victim gives way only if, at its own rank, its GPUs
// are wanted, as in the Tiresias simulator's greedy pass.
func (p *pass) restore(r *runJob) bool {
	if p.teams && !p.mayRestore(r) {
		return false
	}
	if p.count {
		if p.cl.free+p.rsvFree < int(r.n) {
			return false
		}
		p.cl.free -= int(r.n)
		if p.cl.free < 0 { // it takes back GPUs held for a reservation
			p.rsvUnholdN(-p.cl.free)
			p.cl.free = 0
		}
	} else {
		if r.lo == r.hi && r.flags&runForReservation != 0 {
			// It shared its GPU, preempted with every job on it for a
			// reservation (preemptSharers): that GPU is given.
			return false
		}
		for _, s := range p.held[r.lo:r.hi] {
			if p.cl.busy[s] && !p.heldBack(s) {
				return false
			}
		}
		for _, s := range p.held[r.lo:r.hi] {
			if p.heldBack(s) {
				p.unhold(s) // stays busy: held, then its own again
				continue
			}
			p.cl.busy[s] = true
			n := p.cl.slotNode[s]
			p.cl.setFree(int(n), p.cl.nodes[n].free-1)
		}
		p.cl.frDirty = true
	}
	r.state = runKept
	r.flags |= runRestored
	p.outcome[r.job] = outRunning
	p.d.Preempts[r.preempt].For = restored
	p.restored++
	if p.teams {
		p.teamStart(r.job, +1)
	}
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
	if p.fair {
		p.teamKeep(r)
	}
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
	var gpus []gpu.Ref
	if p.count {
		p.cl.free -= r.n
	} else {
		gpus = p.cl.place(r)
		if p.sh.on {
			p.shareStarted(e.job, p.cl.taken)
		}
	}
	p.begin(e, gpus)
}

// begin records the start of pending entry e on gpus, which it has taken.
func (p *pass) begin(e *entry, gpus []gpu.Ref) {
	if p.teams {
		p.teamStart(e.job, +1)
		if p.fair {
			p.lendCheck(p.jteam[e.job])
		}
	}
	p.d.Starts = append(p.d.Starts, Start{JobID: e.id, GPUs: gpus})
	p.startJob = append(p.startJob, e.job)
	p.outcome[e.job] = outStarted
}

// reclaim looks for running jobs ranked below e whose preemption lets
// rule r fit: the lowest-ranked first, until r fits; then it spares,
// highest-ranked first, every victim r can do without. It preempts the
// victims left and reports whether r now fits.
func (p *pass) reclaim(e *entry, r rule) bool {
	p.victims = p.victims[:0]
	fits := false
	var fv fairVictims
	if p.fair {
		p.startFairVictims(e, &fv)
		defer p.endFairVictims(&fv)
	} else {
		p.below.startVictims()
	}
	for !fits {
		var i int32
		if p.fair {
			i = p.nextFairVictim(e, &fv)
		} else {
			i = p.below.nextVictim(p.isVictim)
		}
		if i < 0 {
			break
		}
		p.shift(&p.runs[p.rents[i].run], +1)
		p.victims = append(p.victims, i)
		fits = p.cl.fits(r)
	}
	if !fits {
		for _, i := range p.victims {
			p.shift(&p.runs[p.rents[i].run], -1)
			p.below.putBack(i)
		}
		return false
	}
	for k := len(p.victims) - 1; k >= 0; k-- {
		i := p.victims[k]
		run := &p.runs[p.rents[i].run]
		p.shift(run, -1)
		if p.cl.fits(r) {
			p.victims[k] = -1 // not needed: spared
			p.below.putBack(i)
			continue
		}
		p.shift(run, +1)
	}
	for _, i := range p.victims { // lowest-ranked first
		if i >= 0 {
			p.preemptRun(p.rents[i].run, e)
		}
	}
	return true
}

// isVictim tells whether running entry i may be preempted: it still
// holds its GPUs and frees some, and the policy may take them
// (rsvStarted).
func (p *pass) isVictim(i int32) bool {
	ri := p.rents[i].run
	r := &p.runs[ri]
	return r.state == runOpen && r.n > 0 && !p.rsvStarted(ri)
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
		if !p.cl.nodes[n].sched {
			continue // masked for the job being placed (avoid.go)
		}
		p.cl.setFree(int(n), p.cl.nodes[n].free+sign)
	}
}

// preemptRun commits a victim whose GPUs reclaim already counted free.
func (p *pass) preemptRun(ri int32, by *entry) {
	run := &p.runs[ri]
	run.state = runPreempted
	run.by, run.byJob = by.id, by.job
	p.cl.reclTotal -= int(run.n)
	if !p.count {
		for _, s := range p.held[run.lo:run.hi] {
			p.cl.busy[s] = false
			p.cl.recl[p.cl.slotNode[s]]--
		}
		p.cl.frDirty = true
	}
	p.outcome[run.job] = outPreempted
	again := run.flags&runRestored != 0 // preempted before, restored, and now preempted for good
	if again {
		run.flags &^= runRestored
		p.restored--
	} else {
		run.preempt = int32(len(p.d.Preempts))
		p.preempted = append(p.preempted, ri)
	}
	victim := &p.rents[run.ent]
	pr := Preempt{JobID: victim.id, For: by.id}
	if p.fair {
		p.teamKeep(run) // no longer a candidate
		if run.flags&runYoung != 0 {
			t := &p.fs.t[p.jteam[run.job]]
			t.youngGPUs -= int(run.n)
			if p.s.Jobs[run.job].Class.preemptible() {
				t.youngBatch -= int(run.n)
			}
		}
		if p.jteam[run.job] != p.jteam[by.job] && run.flags&runForReservation == 0 {
			pr.Reclaim = true
			run.flags |= runReclaimed
			if !p.sc.cfg.OmitReasons {
				pr.Reason = p.reclaimReason(victim, by)
			}
		}
	}
	if !pr.Reclaim && !p.sc.cfg.OmitReasons {
		pr.Reason = p.preemptReason(victim, by)
	}
	if p.teams {
		p.teamStart(run.job, -1)
	}
	if p.fair {
		p.teamPreempted(run.job, pr.Reclaim)
	}
	if again {
		p.d.Preempts[run.preempt] = pr
		return
	}
	p.d.Preempts = append(p.d.Preempts, pr)
}
