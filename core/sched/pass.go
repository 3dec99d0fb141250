package sched

import "slices"

// pass is the working memory of one scheduling pass. Schedule pools
// passes so that their slices are reused; nothing in a pass survives into
// the Decisions it returns.
type pass struct {
	sc      *Scheduler
	s       *Snapshot
	now     float64
	count   bool // PlaceCount
	preempt bool // running jobs may be preempted
	dist    *GPUTimeDist

	cl     cluster
	models modelCache

	ents     []entry
	runs     []runJob
	runOrder []int32 // running entries, in priority order
	held     []int32 // slots held by running jobs: runs[i].lo..hi
	qs       []QueueState
	outcome  []uint8 // per job: what the pass did to it
	victims  []int32
	qpos     []int32 // waiting jobs seen so far, per queue
	buf      []byte

	d Decisions
}

// runJob is a running job's grip on its GPUs during a pass.
type runJob struct {
	lo, hi int32 // its slots on schedulable nodes: held[lo:hi]
	pos    int32 // its entry's position in the order, or -1
	job    int32
	state  uint8
	by     int64 // the job it was preempted for
}

// runJob states.
const (
	runOpen      uint8 = iota // may still be preempted by a job ranked above it
	runKept                   // reached in the order: keeps its GPUs
	runPreempted              // chosen as a victim
)

// Job outcomes.
const (
	outNone uint8 = iota
	outStarted
	outPreempted
)

// run executes the pass and returns its decisions.
func (p *pass) run(sc *Scheduler, s *Snapshot) Decisions {
	p.sc, p.s, p.now = sc, s, s.Now
	p.count = sc.cfg.Placement == PlaceCount
	p.preempt = sc.kind.preemptive() && !sc.cfg.NoPreemption
	p.dist = sc.dist
	if s.GPUTimeDist != nil {
		p.dist = s.GPUTimeDist
	}
	p.d = Decisions{}

	p.cl.reset(s.Nodes)
	p.markRunning()
	p.cl.index()
	p.buildEntries()
	slices.SortFunc(p.ents, func(a, b entry) int { return compareEntries(&a, &b) })
	p.runOrder = p.runOrder[:0]
	for i := range p.ents {
		if r := p.ents[i].run; r >= 0 {
			p.runs[r].pos = int32(i)
			p.runOrder = append(p.runOrder, r)
		}
	}
	p.schedule()
	p.recheck()
	return p.d
}

// release drops references into the snapshot before the pass is pooled.
func (p *pass) release() {
	p.sc, p.s, p.dist = nil, nil, nil
	p.d = Decisions{}
	p.models = modelCache{}
	clear(p.cl.nodes[:cap(p.cl.nodes)])
	clear(p.cl.byName)
	p.cl.lastName = ""
}

// markRunning marks the GPUs of running jobs busy and records, per
// running job, the slots it holds on schedulable nodes. A GPU claimed
// twice counts for the first claimant only.
func (p *pass) markRunning() {
	jobs := p.s.Jobs
	p.runs = p.runs[:0]
	p.held = p.held[:0]
	p.outcome = resize(p.outcome, len(jobs))
	clear(p.outcome)
	for i := range jobs {
		j := &jobs[i]
		if j.State != Running {
			continue
		}
		r := runJob{lo: int32(len(p.held)), pos: -1, job: int32(i)}
		for _, g := range j.Placement {
			s := p.cl.slot(g)
			if s < 0 || p.cl.busy[s] {
				continue
			}
			p.cl.busy[s] = true
			if p.cl.nodes[p.cl.slotNode[s]].sched {
				p.held = append(p.held, int32(s))
			}
		}
		r.hi = int32(len(p.held))
		p.runs = append(p.runs, r)
	}
}

// buildEntries computes every job's queue state and sort key. Running
// jobs enter the order only when they may be preempted; their GPUs then
// count as reclaimable.
func (p *pass) buildEntries() {
	jobs := p.s.Jobs
	queued := p.sc.kind.queued()
	p.ents = p.ents[:0]
	p.qs = resize(p.qs, len(jobs))
	run := int32(0)
	for i := range jobs {
		j := &jobs[i]
		if j.State != Pending && j.State != Running {
			continue
		}
		qs := &p.qs[i]
		*qs = QueueState{}
		if queued {
			var why string
			*qs, why = p.advance(j)
			if why != "" {
				p.d.QueueChanges = append(p.d.QueueChanges, QueueChange{
					JobID: j.ID, From: j.Queue.Index, To: qs.Index, State: *qs, Reason: why})
			}
		}
		e := entry{id: j.ID, job: int32(i), run: -1, gpus: int32(min(max(j.GPUs, -1), 1<<30))}
		if j.State == Running {
			ri := run
			run++
			if !p.preempt {
				continue
			}
			e.run = ri
			r := &p.runs[ri]
			for _, s := range p.held[r.lo:r.hi] {
				p.cl.recl[p.cl.slotNode[s]]++
			}
			p.cl.reclTotal += int(r.hi - r.lo)
		}
		p.key(&e, j, qs)
		p.ents = append(p.ents, e)
	}
	p.cl.frDirty = true
}

// schedule walks the order once. A running job reached in the order keeps
// its GPUs. A pending job starts if it fits the free GPUs, or, under a
// preemptive policy, if it fits once running jobs ranked below it are
// preempted; otherwise it waits, and under fifo so does everyone behind
// it.
func (p *pass) schedule() {
	p.qpos = resize(p.qpos, p.sc.Queues())
	clear(p.qpos)
	if !p.sc.cfg.OmitWaits {
		p.d.Waits = make([]Wait, 0, len(p.ents)-len(p.runOrder)+2*len(p.runOrder)/3)
	}
	var blocker *entry
	for pos := range p.ents {
		e := &p.ents[pos]
		if e.run >= 0 {
			r := &p.runs[e.run]
			if r.state == runPreempted {
				p.waitPreempted(e)
				continue
			}
			p.keep(r)
			continue
		}
		avail := p.cl.free
		if p.preempt {
			avail += p.cl.reclTotal
		}
		if p.sc.cfg.OmitWaits && (avail == 0 || blocker != nil) {
			break // nothing behind can start
		}
		if blocker != nil {
			p.waitBlocked(e, blocker)
			continue
		}
		n := int(e.gpus)
		if n <= 0 || n > avail {
			// No placement can help: decide without reading the job.
			p.explain(e, rule{n: n})
		} else {
			r := p.ruleFor(e)
			if p.cl.fits(r) || (p.preempt && p.cl.fitsReclaiming(r) && p.reclaim(pos, r)) {
				p.start(e, r)
				continue
			}
			p.explain(e, r)
		}
		if p.sc.kind == kindFIFO && n > 0 && n <= p.cl.capacity {
			blocker = e // a job that can never run blocks nobody
		}
	}
}

// keep lets a running job keep its GPUs: no job ranked below it may take
// them.
func (p *pass) keep(r *runJob) {
	r.state = runKept
	for _, s := range p.held[r.lo:r.hi] {
		p.cl.recl[p.cl.slotNode[s]]--
	}
	p.cl.reclTotal -= int(r.hi - r.lo)
	p.cl.frDirty = true
}

// start places a pending job that fits.
func (p *pass) start(e *entry, r rule) {
	gpus := p.cl.place(r, make([]GPURef, 0, r.n))
	p.d.Starts = append(p.d.Starts, Start{JobID: e.id, GPUs: gpus})
	p.outcome[e.job] = outStarted
}

// reclaim looks for running jobs ranked below position pos whose
// preemption lets rule r fit: the lowest-ranked first, until r fits; then
// it spares, highest-ranked first, every victim r can do without. It
// preempts the victims left and reports whether r now fits.
func (p *pass) reclaim(pos int, r rule) bool {
	p.victims = p.victims[:0]
	fits := false
	for k := len(p.runOrder) - 1; k >= 0 && !fits; k-- {
		ri := p.runOrder[k]
		run := &p.runs[ri]
		if int(run.pos) <= pos {
			break
		}
		if run.state != runOpen || run.hi == run.lo {
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
			p.preemptRun(ri, &p.ents[pos])
		}
	}
	return true
}

// shift frees (+1) or re-occupies (-1) a running job's GPUs in the free
// counts only: a tentative step of reclaim.
func (p *pass) shift(run *runJob, sign int32) {
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
	for _, s := range p.held[run.lo:run.hi] {
		p.cl.busy[s] = false
		p.cl.recl[p.cl.slotNode[s]]--
	}
	p.cl.reclTotal -= int(run.hi - run.lo)
	p.cl.frDirty = true
	p.outcome[run.job] = outPreempted
	victim := &p.ents[run.pos]
	p.d.Preempts = append(p.d.Preempts, Preempt{
		JobID:  victim.id,
		For:    by.id,
		Reason: p.preemptReason(victim, by),
	})
}

// recheck finds the earliest time at which a job changes queue: a running
// job reaching its queue's threshold, a waiting one due for promotion.
func (p *pass) recheck() {
	if !p.sc.kind.queued() {
		return
	}
	for i := range p.s.Jobs {
		j := &p.s.Jobs[i]
		if j.State != Pending && j.State != Running {
			continue
		}
		running := (j.State == Running && p.outcome[i] != outPreempted) || p.outcome[i] == outStarted
		p.recheckAt(p.queueRecheck(j, &p.qs[i], running))
	}
}

// recheckAt lowers Decisions.Recheck to t, unless t is 0.
func (p *pass) recheckAt(t float64) {
	if t > p.now && (p.d.Recheck == 0 || t < p.d.Recheck) {
		p.d.Recheck = t
	}
}
