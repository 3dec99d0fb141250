package sched

import "strings"

// pass is the working memory of one scheduling pass. Schedule pools
// passes so that their slices are reused; nothing in a pass survives into
// the Decisions it returns.
type pass struct {
	sc      *Scheduler
	pol     *policy // sc's policy
	s       *Snapshot
	snap    Snapshot // what s points to: Schedule's argument, copied so that it stays off the heap
	now     float64
	count   bool // PlaceCount
	preempt bool // running jobs may be preempted
	// ownPreempt: the policy itself preempts (under fair share, only
	// within a team; reclaiming is the other way to preempt).
	ownPreempt bool
	track      bool // running jobs get entries: preempt, or fair share's order
	dist       *GPUTimeDist

	cl     cluster
	models modelCache
	sh     shareState // Salus co-location (share.go)
	gcache indexCache // full Gittins indices (policy_gittins.go)

	ents      []entry // pending jobs
	pending   stream  // ents in priority order
	rents     []entry // running jobs that may be preempted
	merged    bool    // rents sorted and merged into the walk
	keyed     bool    // rents have their sort keys
	rented    bool    // rents are built (running)
	counted   bool    // reclaimable compared one entry with every running job
	runQ      []int   // GPUs of running jobs per queue (queue policies)
	runDemQ   []int   // those of them demoted in the pass (runningFirstUnlessDemoted)
	runIdx    []int32 // count mode: the running jobs, until running() builds runs
	below     below   // merged rents not reached yet
	reachBuf  []int32
	preempted []int32 // runs preempted in this pass
	restored  int     // preemptions taken back
	runs      []runJob
	held      []int32 // slots held by running jobs: runs[i].lo..hi
	shared    []int32 // slots more than one running job claims
	qs        []QueueState
	due       []float64 // per job: when its queue changes if it stays as it is
	dueMin    float64   // the earliest of due after now, 0 for none (recheck)
	outcome   []uint8   // per job: what the pass did to it
	victims   []int32
	noQueue   QueueState // the queue state of jobs under a policy without queues
	headBuf   []float64  // preemptedFirst: the head of each queue's line
	qpos      []int32    // waiting jobs seen so far, per queue
	buf       []byte
	// The wait reasons, one after the other in chunks of reasonChunk
	// bytes: each Wait.Reason is a part of its chunk's string, and a full
	// chunk is left to the waits that point into it (addWait).
	reasons strings.Builder

	// Machines hidden from the pending job being decided (avoid.go).
	masked     []int32
	maskedCap  int // their GPUs
	maskedFree int // their free GPUs

	// Teams (fair.go): set when Snapshot.Teams guarantees GPUs (fair) or
	// caps users (teams without fair).
	fair, teams bool
	fs          fairTeams
	jteam       []int32 // per job: its team in fs
	juser       []int32 // per job: its user's slot in uheld, or -1 (no cap)
	jheld       []int   // per job: what it counts for in its team's GPUs, in units (heldGPUs)
	heldTmp     heldScratch
	uheld, ucap []int32
	users       map[userKey]int32
	// Fair share inside a team (usershare.go): per pending job moved
	// down its team's slots, the teammate's job now in its old slot.
	behind map[int32]int32
	// The order of classes within a team (classorder.go): per pending job
	// moved down its team's slots, the job of a better band now ahead of it.
	behindClass map[int32]int32
	// Fair share inside a team (usershare.go): the users of the listed
	// teams with jobs pending or running (uslots, found by their names in
	// uslotOf, each team's in uteam), each job's slot (ujslot, -1 for
	// none), the entries of each team and queue (ugroups, found in
	// ugroupOf), and reslot's scratch.
	uslotOf  map[teamUser]int32
	uslots   []uslot
	uteam    [][]int32
	ujslot   []int32
	ugroupOf map[uint64]int32
	ugroups  []ugroup
	ufs      []float64 // the distinct factors of a team, highest first
	urank    []int32
	ukrank   []int32
	uwant    []int32
	upos     []int32
	ukeys    []ukeys
	lendStop bool       // a job within its guarantee waits: nothing is lent
	lendBy   int32      // that job, an index in Snapshot.Jobs
	lendMemo lendText   // the last waitLending's words
	order    []int32    // scratch
	borrows  []borrow   // scratch of markBorrowed
	later    laterQueue // pending jobs deferred to the borrowers

	// Reservations (reserve.go).
	rsvOn        bool               // some job may get a reservation in this pass
	rsvPreempt   bool               // later jobs may backfill as preemptible
	rsvAnyLimit  bool               // some pending job declared a time limit
	rsvMax       int                // Config.MaxReservations
	rsvBound     map[string]float64 // teams' own bounds
	rsvNext      float64            // when the next waiting job becomes due, or 0
	rsvIsDue     []bool             // per job: pending, due for a reservation, not yet decided
	rsvWithin    []bool             // fair share: per job, within its team's guarantee when decided
	rsvNoStart   bool               // tryReserve reserves, but starts nothing
	rsvDueLeft   int                // such jobs
	rsv          []rsvState
	rsvJust      int32   // the job whose reservation was just made, or -1
	rsvJustSess  []int64 // the sessions on its GPUs, for its reason (rsvSessions)
	rsvBehind    int32   // the job just refused one for jobs due first (rsvRoom), or -1
	rsvPending   int32   // that reservation, until rsvCommit holds its GPUs back, or -1
	rsvOwner     []int32 // per slot: the reservation it belongs to, or -1
	rsvHeld      []bool  // per slot: free, held back (marked busy) for its reservation
	rsvFree      int     // free GPUs held back
	rsvOpened    []int32 // slots opened for the job being decided
	rsvOpenN     int     // count mode: GPUs opened for it
	startJob     []int32 // per Decisions.Starts entry: its job
	freeAt       []float64
	runEnd       []float64 // per run: endAt, NaN until asked (runEndAt)
	runStart     []entry   // per run: its entry as a waiting job when it started, job -1 until asked (startKey)
	runDue       []uint8   // per run: rsvStarted, 0 until asked, then 1 (yes) or 2 (no)
	slotRun      []int32
	rsvCand      []int32
	rsvShared    []bool          // per slot: held by several running jobs, no run alone (sharedFreeAt)
	rsvShareFree []bool          // per slot: a shared GPU freed by preempting all its jobs (sharedVictims); empty when none
	rsvKept      map[int64]int32 // Snapshot.Reservations by job ID: their index
	rsvHolder    []int32         // per job: 1 + its kept reservation's index, 0 for none (sized when some are kept)
	rsvFreshDue  bool            // some due job had not had its lend (rsvLent) when the walk began
	rsvFirst     []rsvDue        // the jobs due, first to be reserved first (rsvScanEnd); the walk drops those it took (rsvRoom)
	rsvHead      int             // rsvFirst before it: taken by the walk
	rsvKeep      []int32         // rsvRoom's scratch
	rsvHolders   []int32         // the holders, indices in Snapshot.Jobs
	rsvKeptSlot  []int32         // per slot: the holder whose kept reservation names it, or -1 (built when asked)
	rsvEarlyList []rsvEarly      // holders of kept reservations, with their slots (rsvEarlyBegin)
	rsvEarlyHeld []int32         // slots held off the job being decided (rsvEarlyHold)
	rsvTimes     []float64
	rsvCount     []int32
	rsvNodes     []int32
	rsvPool      []int32
	rsvScratch   []int32
	rsvRels      []rsvRel

	// occDefer: nodes mode under Config.StablePlacements on plain nodes:
	// scan builds the runs from what the last pass kept (occ, occupy.go).
	occDefer bool
	occ      occupancy

	d Decisions
	// last: the slices of the last pass's Decisions, for the next to
	// build its own in (Config.ReuseDecisions).
	last Decisions
}

// runJob is a running job's grip on its GPUs during a pass.
type runJob struct {
	lo, hi  int32 // its slots on schedulable nodes: held[lo:hi] (nodes mode)
	n       int32 // GPUs its preemption would free
	ent     int32 // its entry in rents once merged, or -1
	job     int32
	state   uint8
	flags   uint8 // fair share: runBorrowed, runEligible, runYoung, runReclaimed
	by      int64 // the job it was preempted for
	preempt int32 // its Preempt in Decisions.Preempts
	byJob   int32 // that job, an index in Snapshot.Jobs
}

// runJob flags: under fair share, and those of sharing and reservations.
const (
	runBorrowed       uint8 = 1 << iota // beyond its team's guarantee when the pass began
	runEligible                         // borrowed, past its minimum runtime: may be reclaimed
	runYoung                            // borrowed, short of its minimum runtime
	runReclaimed                        // preempted to give its GPUs back to another team
	runPinned                           // shares its GPU with a job started in the pass (share.go)
	runForReservation                   // preempted for a reserved job (reserve.go)
	runRestored                         // preempted in the pass, then its preemption taken back (restore)
	// runLent: preempted for another team's reservation past its
	// deadline though it had waited its own bound (reserve.go,
	// overdueVictim): it goes back first in its queue.
	runLent
)

// runJob states.
const (
	runOpen      uint8 = iota // may still be preempted by a job ranked above it
	runKept                   // keeps its GPUs
	runPreempted              // chosen as a victim
	runReached   uint8 = 4    // flag: the walk has passed it
)

// Job outcomes: where each job of the snapshot ends the pass.
const (
	outSkipped   uint8 = iota // not pending nor running: ignored
	outWaiting                // pending, and stays so
	outRunning                // running, and stays so
	outStarted                // pending, started
	outPreempted              // running, preempted
)

// run executes the pass and returns its decisions.
func (p *pass) run(sc *Scheduler, s *Snapshot) Decisions {
	p.sc, p.pol, p.s, p.now = sc, sc.pol, s, s.Now
	p.count = sc.cfg.Placement == PlaceCount
	p.fair, p.teams = false, false
	if len(s.Teams) > 0 {
		p.fs.build(s.Teams)
		p.fair, p.teams = p.fs.on, p.fs.on || p.fs.capped
	}
	p.ownPreempt = sc.pol.preempts && !sc.cfg.NoPreemption
	p.preempt = p.ownPreempt || p.fair && !sc.cfg.NoPreemption
	p.track = p.preempt || p.fair
	p.dist = sc.dist
	if s.GPUTimeDist != nil {
		p.dist = s.GPUTimeDist
	}
	p.d = Decisions{}
	if sc.cfg.ReuseDecisions {
		p.d.Starts, p.d.Preempts, p.d.QueueChanges = p.last.Starts[:0], p.last.Preempts[:0], p.last.QueueChanges[:0]
	}
	p.sh.on = false

	p.load()
	if p.fair {
		p.userOrder()
	}
	p.classOrder()
	if p.teams {
		p.teamScan()
	}
	p.pending.init(p.ents, p.sc.cfg.OmitWaits)
	p.walk()
	if p.pol.preemptedFirst {
		p.preemptedFirst()
	}
	p.recheck()
	p.rsvRecheck()
	if p.fair {
		p.markBorrowed()
	}
	p.allocate()
	if sc.cfg.ReuseDecisions {
		p.reuse()
	}
	return p.d
}

// reuse keeps the slices of the decisions for the next pass
// (Config.ReuseDecisions), and returns an empty one as nil, as a pass
// that does not reuse them does.
func (p *pass) reuse() {
	d := &p.d
	p.last.Starts, p.last.Preempts, p.last.QueueChanges = d.Starts, d.Preempts, d.QueueChanges
	if len(d.Starts) == 0 {
		d.Starts = nil
	}
	if len(d.Preempts) == 0 {
		d.Preempts = nil
	}
	if len(d.QueueChanges) == 0 {
		d.QueueChanges = nil
	}
}

// release drops references into the snapshot before the pass is pooled;
// only the node names stay, for the next pass to compare (sameNames),
// and the model names looked up (modelCache.release), and under
// Config.StablePlacements the nodes' GPU lists (cluster.same) and the
// running jobs' placements (occupancy), which are never written.
func (p *pass) release() {
	p.sc, p.pol, p.s, p.dist = nil, nil, nil, nil
	p.snap = Snapshot{}
	p.d = Decisions{}
	p.models.release()
	if p.teams {
		p.fs.release()
		clear(p.users)
		clear(p.uslotOf)
		clear(p.uslots)
		p.later.reset()
	}
	p.cl.src = nil
	clear(p.cl.dedup[:cap(p.cl.dedup)])
	p.cl.lastName = ""
	shared := p.sh.gpus[:cap(p.sh.gpus)]
	for k := range shared {
		shared[k].lg = nil
	}
}

// load fills the pass's cluster from the snapshot's nodes and its entries
// from the snapshot's jobs (scan), holding the GPUs running jobs hold,
// with the reservations handed back; in node placement it then indexes
// the free GPUs and builds the shared GPUs' lanes.
func (p *pass) load() {
	if p.count {
		p.cl.resetCount(p.s.Nodes)
	} else {
		p.cl.reset(p.s.Nodes, p.sc.cfg.StablePlacements)
	}
	p.rsvBegin()
	p.scan()
	if p.rsvOn {
		p.rsvScanEnd()
	}
	if !p.count {
		if p.occDefer {
			p.occFinish()
		}
		if len(p.shared) > 0 {
			p.dropShared()
		}
		p.cl.index()
		if p.sh.on {
			p.shareBuild()
		}
	}
}

// scan reads every job once. It records what each running job holds: in
// nodes mode its GPUs are marked busy, and those on schedulable nodes are
// what its preemption would free (a GPU claimed twice counts for its
// first claimant only); in count mode a running job holds Job.GPUs GPUs.
// It computes every job's queue state and sort key: pending jobs enter
// the order, running ones too when they may be preempted.
func (p *pass) scan() {
	jobs := p.s.Jobs
	queued := p.pol.queues != nil
	p.runs, p.held, p.shared = p.runs[:0], p.held[:0], p.shared[:0]
	p.ents, p.rents, p.runIdx = p.ents[:0], p.rents[:0], p.runIdx[:0]
	p.outcome = resize(p.outcome, len(jobs))
	clear(p.outcome)
	p.keyed, p.rented = false, false
	p.occBegin()
	if queued {
		p.qs = resize(p.qs, len(jobs))
		p.due = resize(p.due, len(jobs))
		p.runQ = resize(p.runQ, len(p.sc.thr)+1)
		clear(p.runQ)
		if p.pol.runningFirstUnlessDemoted {
			p.runDemQ = resize(p.runDemQ, len(p.runQ))
			clear(p.runDemQ)
		}
	}
	none := &p.noQueue
	p.dueMin = 0
	for i := range jobs {
		j := &jobs[i]
		if j.State != Pending && !j.holds() {
			continue
		}
		running := j.holds()
		qs := none
		if queued {
			qs = &p.qs[i]
			due := p.dueAt(j, qs, p.queueState(j, qs), running)
			p.due[i] = due
			if due > p.now && (p.dueMin == 0 || due < p.dueMin) {
				p.dueMin = due
			}
		}
		if !running {
			p.outcome[i] = outWaiting
			e := p.newEntry(&p.ents)
			e.id, e.job, e.run, e.gpus = j.ID, int32(i), -1, clampGPUs(j.GPUs)
			p.key(e, j, qs)
			if j.Sharing {
				p.shareScan(j)
			}
			if p.rsvOn {
				p.rsvScan(int32(i), j, p.ents[len(p.ents)-1].gpus)
			}
			continue
		}
		p.outcome[i] = outRunning
		kept := p.keptClass(j)
		var n int
		if p.count {
			// A count-mode pass that preempts nobody never needs more.
			n = int(max(clampGPUs(j.GPUs), 0))
			p.cl.free -= n
			p.runIdx = append(p.runIdx, int32(i))
		} else {
			var r *runJob
			if p.occDefer {
				r = p.occHold(j, i)
			} else {
				r = p.hold(j, i)
			}
			n = int(r.n)
			if kept {
				r.state = runKept
			}
		}
		if p.preempt && !kept {
			p.cl.reclTotal += n
			if queued {
				p.runQAdd(int32(i), n)
			}
		}
	}
}

// running builds the running jobs' entries (rents), and in count mode
// their records (runs), that scan left out; the walk asks for them once
// it needs their ranks, which a pass that preempts nobody seldom does.
// rents[i] is then run i's entry.
func (p *pass) running() {
	if !p.track || p.rented {
		return
	}
	p.rented = true
	if !p.count {
		queued := p.pol.queues != nil
		for k := range p.runs {
			i := p.runs[k].job
			j := &p.s.Jobs[i]
			q := p.noQueue.Index
			if queued {
				q = p.qs[i].Index
			}
			e := p.newEntry(&p.rents)
			e.id, e.job, e.run, e.gpus, e.queue = j.ID, i, int32(k), clampGPUs(j.GPUs), int32(q)
		}
		return
	}
	for _, i := range p.runIdx {
		j := &p.s.Jobs[i]
		g := clampGPUs(j.GPUs)
		e := p.newEntry(&p.rents)
		e.id, e.job, e.run, e.gpus = j.ID, i, int32(len(p.runs)), g
		r := p.newRun()
		r.n, r.ent, r.job = max(g, 0), -1, i
		if p.keptClass(j) {
			r.state = runKept
		}
	}
}

// keptClass tells whether running job j keeps its GPUs whatever the
// pass does: a leaving job, and a job of a class the policy never
// preempts (class.go) when no team may reclaim it. Under fair share such
// a job stays a candidate for a reclaim, taken only after every batch
// borrower (nextFairVictim).
func (p *pass) keptClass(j *Job) bool {
	return j.State == Leaving || !j.Class.preemptible() && !p.fair
}

func clampGPUs(n int) int32 { return int32(min(max(n, -1), 1<<30)) }

// hold records what running job j (at index i) holds in nodes mode, as
// a new run.
func (p *pass) hold(j *Job, i int) *runJob {
	lo := int32(len(p.held))
	cl := &p.cl
	for _, g := range j.Placement {
		// locate, inlined: a job's GPUs are mostly on the node found
		// last, the first GPU of a job is found by find.
		ni := cl.lastNode
		if ni < 0 || !sameString(g.Node, cl.lastName) {
			var ok bool
			if ni, ok = cl.find(g.Node); !ok {
				continue
			}
			cl.lastName, cl.lastNode = g.Node, ni
		}
		n := &cl.nodes[ni]
		s := int(n.first) + g.Index
		if !n.dense {
			if s = cl.sparseSlot(ni, g.Index); s < 0 {
				continue
			}
		} else if uint(g.Index) >= uint(n.n) {
			continue
		}
		if cl.busy[s] {
			p.shared = append(p.shared, int32(s))
			continue
		}
		cl.busy[s] = true
		n.free--
		if n.sched {
			p.held = append(p.held, int32(s))
		}
	}
	hi := int32(len(p.held))
	r := p.newRun()
	r.lo, r.hi, r.n, r.ent, r.job = lo, hi, hi-lo, -1, int32(i)
	return r
}

// runQAdd adds n to what preemption could free in the queue of running
// job i (runQ), and in runDemQ if i was demoted in the pass.
func (p *pass) runQAdd(i int32, n int) {
	q := min(max(p.qs[i].Index, 0), len(p.runQ)-1)
	p.runQ[q] += n
	if p.pol.runningFirstUnlessDemoted && p.qs[i].Index != p.s.Jobs[i].Queue.Index {
		p.runDemQ[q] += n
	}
}

// dropShared handles a snapshot in which running jobs claim the same
// GPU: such a GPU stays busy whoever is preempted, so it counts for no
// one's preemption.
func (p *pass) dropShared() {
	mark := make([]bool, len(p.cl.busy))
	for _, s := range p.shared {
		mark[s] = true
	}
	out := int32(0)
	for i := range p.runs {
		r := &p.runs[i]
		lo := out
		for _, s := range p.held[r.lo:r.hi] {
			if !mark[s] {
				p.held[out] = s
				out++
			}
		}
		if lost := int(r.n - (out - lo)); lost > 0 && p.preempt && r.state == runOpen {
			p.cl.reclTotal -= lost
			if p.pol.queues != nil {
				p.runQAdd(r.job, -lost)
			}
		}
		r.lo, r.hi, r.n = lo, out, out-lo
	}
	p.held = p.held[:out]
}

// recheck finds the earliest time at which a job changes queue: a running
// job reaching its queue's threshold, a waiting one due for promotion.
func (p *pass) recheck() {
	if p.pol.queues == nil {
		return
	}
	if len(p.d.Starts) == 0 && len(p.preempted) == 0 {
		// Every job ends the pass as scan found it (a pass that starts
		// and preempts nobody, most of a replay's): the earliest of
		// their due times is scan's.
		p.recheckAt(p.dueMin)
		return
	}
	for i, out := range p.outcome {
		switch out {
		case outWaiting, outRunning:
			p.recheckAt(p.due[i])
		case outStarted, outPreempted:
			j, qs := &p.s.Jobs[i], &p.qs[i]
			p.recheckAt(p.dueAt(j, qs, p.cycleService(j, qs), out == outStarted))
		}
	}
}

// recheckAt lowers Decisions.Recheck to t, unless t is 0.
func (p *pass) recheckAt(t float64) {
	if t > p.now && (p.d.Recheck == 0 || t < p.d.Recheck) {
		p.d.Recheck = t
	}
}

// newEntry appends a zero entry to *ents and returns it, for the caller
// to fill in place. An entry built whole and then appended is written
// field by field on the stack and copied in wide loads, which stall on
// store forwarding: in a replay, a few percent of every pass.
func (p *pass) newEntry(ents *[]entry) *entry {
	*ents = append(*ents, entry{})
	return &(*ents)[len(*ents)-1]
}

// newRun appends a zero run to p.runs and returns it (see newEntry).
func (p *pass) newRun() *runJob {
	p.runs = append(p.runs, runJob{})
	return &p.runs[len(p.runs)-1]
}
