package sched

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// Fair share in the pass (docs/fair-share.md). teamScan gives every job
// its team, and tiers marks the running jobs that borrow. The walk takes
// the pending jobs in the policy's order (fk 0) and defers to the
// borrowers (fk 2-F, best fair-share factor first) any that does not fit
// within its team's guarantee when its turn comes (teamHold); the running
// jobs are all with the borrowers. A job that fits within its guarantee
// may reclaim, from other teams beyond theirs, the borrowed jobs that have
// run the minimum runtime (nextFairVictim); while such a job waits, or a
// team has room for one of its jobs preempted in the pass, nothing is lent
// (lendStop).

// userKey names a user within a team.
type userKey struct {
	team int32
	user string
}

// release drops references into the snapshot.
func (ft *fairTeams) release() {
	all := ft.t[:cap(ft.t)]
	for i := range all {
		all[i] = fteam{cross: all[i].cross[:0], own: all[i].own[:0], sess: all[i].sess[:0]}
	}
	clear(ft.byName)
}

// teamScan reads the teams of the jobs: GPUs held per team and per capped
// user, and, under fair share, which running jobs borrow and which of
// those may be reclaimed.
func (p *pass) teamScan() {
	jobs := p.s.Jobs
	ft := &p.fs
	for i := range jobs {
		if p.outcome[i] != outSkipped {
			ft.index(jobs[i].Team)
		}
	}
	ft.sortExtra()
	p.jteam = resize(p.jteam, len(jobs))
	p.juser = resize(p.juser, len(jobs))
	p.heldGPUs(nil)
	p.uheld, p.ucap = p.uheld[:0], p.ucap[:0]
	if p.users == nil {
		p.users = map[userKey]int32{}
	}
	for i := range jobs {
		p.jteam[i], p.juser[i] = -1, -1
		if p.outcome[i] == outSkipped {
			continue
		}
		j := &jobs[i]
		t := ft.byName[j.Team]
		p.jteam[i] = t
		n := jobGPUs(j)
		running := p.outcome[i] == outRunning
		if running {
			ft.t[t].inUse += p.jheld[i]
		}
		if !ft.capped {
			continue
		}
		c := ft.t[t].capOf(j.User)
		if c <= 0 {
			continue
		}
		k := userKey{t, j.User}
		u, ok := p.users[k]
		if !ok {
			u = int32(len(p.uheld))
			p.users[k] = u
			p.uheld = append(p.uheld, 0)
			p.ucap = append(p.ucap, int32(min(c, 1<<30)))
		}
		p.juser[i] = u
		if running {
			p.uheld[u] += int32(n)
		}
	}
	p.lendStop, p.lendMemo.ok = false, false
	if !p.fair {
		return
	}
	p.running()
	p.keyRunning()
	p.tiers()
}

// jobGPUs is what a job counts for in its team's GPUs.
func jobGPUs(j *Job) int { return int(max(clampGPUs(j.GPUs), 0)) }

// refEntry decodes a pending entry k as k, a running one as -1-k.
func (p *pass) refEntry(r int32) *entry {
	if r >= 0 {
		return &p.ents[r]
	}
	return &p.rents[-1-r]
}

// tiers marks the running jobs. Every running job goes with the
// borrowers, by its team's fair-share factor: so the jobs that fit within
// their team's guarantee come first, and may preempt (by the rules of
// nextFairVictim) any running job, while within a team the policy's order
// holds. In each team's running jobs, in the policy's order, a job that
// passes the guarantee borrows, and may be reclaimed once it has run the
// minimum runtime. The walk defers a pending job that does not fit
// within its team's guarantee (teamHold). A team's sessions fill its
// guarantee before its batch jobs (classFirst), so that its batch jobs
// are the ones that borrow.
func (p *pass) tiers() {
	order := p.order[:0]
	for k := range p.rents {
		order = append(order, int32(k))
	}
	slices.SortFunc(order, func(a, b int32) int {
		ea, eb := &p.rents[a], &p.rents[b]
		if ta, tb := p.jteam[ea.job], p.jteam[eb.job]; ta != tb {
			return int(ta - tb)
		}
		if c := p.classFirst(ea, eb); c != 0 {
			return c
		}
		return compareKeys(ea, eb)
	})
	p.order = order
	cum, team := 0, int32(-1)
	for _, k := range order {
		e := &p.rents[k]
		j := &p.s.Jobs[e.job]
		t := &p.fs.t[p.jteam[e.job]]
		if p.jteam[e.job] != team {
			team, cum = p.jteam[e.job], 0
		}
		e.fk = 2 - t.f
		run := &p.runs[e.run]
		batch := j.Class.preemptible()
		if p.ownPreempt && batch {
			t.own = append(t.own, e.run)
			t.ownOpen += int(run.n)
		}
		cum += p.jheld[e.job]
		if cum <= t.g {
			continue
		}
		run.flags |= runBorrowed
		if run.n <= 0 {
			continue
		}
		// A job whose start time is not a number is never reclaimed.
		minRun := p.minRunOf(j)
		if ran := p.now - j.LastStartTime; ran >= minRun {
			run.flags |= runEligible
			if batch {
				t.cross = append(t.cross, e.run)
			} else {
				t.sess = append(t.sess, e.run)
			}
			t.crossOpen += int(run.n)
		} else if ran < minRun {
			run.flags |= runYoung
			if at := j.LastStartTime + minRun; t.youngGPUs == 0 || at < t.youngAt {
				t.youngAt, t.youngRun = at, minRun
			}
			t.youngGPUs += int(run.n)
			if batch {
				t.youngBatch += int(run.n)
			}
		}
	}
	// Candidates are taken lowest rank first.
	for i := range p.fs.t {
		slices.Reverse(p.fs.t[i].cross)
		slices.Reverse(p.fs.t[i].own)
		slices.Reverse(p.fs.t[i].sess)
	}
}

// minRunOf is how long running job j runs, since it last started,
// before a team under its guarantee may reclaim the GPUs it borrows: the
// minimum runtime (Config.MinRuntimeS) or, for a job that asks more GPUs
// than its team's guarantee and started due for a reservation
// (startedDue: it had waited its bound, or with a lead its bound less
// the lead), its bound if that is longer. Such a job runs only on GPUs
// another team lends, and once reclaimed it has had its lend (rsvLent):
// its start, the promise reservations make (a start within about its
// bound), is worth a run as long as the lender's own jobs are promised
// for theirs ("Reservations under fair share", rules 3 and 4). Before
// (issue 30), under the demo's 30 s minimum runtime and 5 min bound, a
// team's 8-GPU job waited up to its bound for the other team's GPUs to
// drain, ran 30 s of its 20 to 180 and was reclaimed, then waited for as
// long as the other team kept its guarantee busy.
func (p *pass) minRunOf(j *Job) float64 {
	if p.rsvOn && p.beyondGuarantee(j) && p.startedDue(j) {
		return max(p.sc.minRun, p.boundOf(j))
	}
	return p.sc.minRun
}

// youngRunAt is the minimum runtime (minRunOf) of the borrowed job that
// another team may reclaim first, at time at (fairCause).
func (p *pass) youngRunAt(at float64) float64 {
	for i := range p.fs.t {
		if v := &p.fs.t[i]; v.youngGPUs > 0 && v.youngAt == at {
			return v.youngRun
		}
	}
	return p.sc.minRun
}

// classFirst orders two running jobs of one team for the count of its
// guarantee by their classes' fill (class.go): sessions (jobs of a class
// the policy never preempts) first, low-priority batch jobs last; 0 when
// both fill alike.
func (p *pass) classFirst(a, b *entry) int {
	fa, fb := p.s.Jobs[a.job].Class.fill(), p.s.Jobs[b.job].Class.fill()
	return int(fa) - int(fb)
}

// peek returns the next pending entry in the walk's order: from the
// stream, or a job deferred to the borrowers, whichever ranks first.
func (p *pass) peek() *entry {
	a := p.pending.peek()
	if p.later.len() == 0 {
		return a
	}
	if b := p.later.peek(); a == nil || compareEntries(b, a) < 0 {
		return b
	}
	return a
}

// pop takes next, which peek returned.
func (p *pass) pop(next *entry) *entry {
	if p.rsvDueLeft > 0 {
		p.rsvDecided(next)
	}
	if p.later.len() > 0 && p.later.peek() == next {
		p.later.pop()
		return next
	}
	return p.pending.pop()
}

// What teamHold does with the pending entry the walk reached.
const (
	teamGo          = iota // decide it as any job
	teamHeld               // taken out of the walk: deferred or waiting
	teamReserveOnly        // a borrower due for a reservation while lending is stopped
)

// teamHold takes pending entry e, which peek returned, out of the walk
// for its team's sake, and tells whether it did (teamHeld). A job of a
// team under its guarantee that does not fit within it is deferred to
// the borrowers, by its team's fair-share factor, unless it is due for a
// reservation the pass may still give and does not fit the free GPUs: it
// is then decided at its policy rank (docs/scheduling.md, "Reservations
// under fair share"), and, while lending is stopped, only reserved for
// (teamReserveOnly). One that fits needs no reservation: deferred, it
// takes no free GPU that a job within its team's guarantee, ranked below
// it, would take. A
// job waits (explained) when its user would pass a cap, or when it would
// borrow while lending is stopped.
func (p *pass) teamHold(e *entry) int {
	n := int(e.gpus)
	if n <= 0 {
		return teamGo
	}
	atRank := false
	if p.fair && e.fk == 0 && !p.entitled(e) {
		// A job that holds a reservation is decided at its rank even
		// when it fits the free GPUs: they are its reserved ones.
		if !p.rsvAtRank(e) || !p.rsvHolds(e.job) && p.fitsFree(e) {
			e = p.pop(e)
			v := p.jteam[e.job]
			e.fk = 2 - p.fs.t[v].f
			p.later.push(e, v)
			return teamHeld
		}
		atRank = true
	}
	if u := p.juser[e.job]; u >= 0 && int(p.uheld[u])+n > int(p.ucap[u]) {
		p.waitUserCap(e, u)
		p.pop(e)
		return teamHeld
	}
	if p.lendStop {
		if t := &p.fs.t[p.jteam[e.job]]; t.inUse+n*unit > t.g {
			if atRank {
				return teamReserveOnly
			}
			p.waitLending(e)
			p.pop(e)
			return teamHeld
		}
	}
	return teamGo
}

// fitsFree tells whether pending entry e fits the free GPUs of the
// machines it may use (masked for it until the walk's next step).
func (p *pass) fitsFree(e *entry) bool {
	if int(e.gpus) > p.cl.free {
		return false
	}
	p.mask(e)
	return p.cl.fits(p.ruleFor(e))
}

// entitled tells whether e's team has room for e within its guarantee.
func (p *pass) entitled(e *entry) bool {
	t := &p.fs.t[p.jteam[e.job]]
	return t.inUse+int(e.gpus)*unit <= t.g
}

// reclaims tells whether e may reclaim GPUs lent to other teams: it fits
// within its team's guarantee (the walk defers the others).
func (p *pass) reclaims(e *entry) bool {
	return e.fk == 0 && p.entitled(e) && !p.sc.cfg.NoPreemption
}

// fairBound is at least what preemption could free for e: its own team's
// open jobs (when the policy preempts) and, when it may reclaim, the open
// reclaimable jobs of teams over their guarantee.
func (p *pass) fairBound(e *entry) int {
	ti := p.jteam[e.job]
	b := 0
	if p.ownPreempt {
		b = p.fs.t[ti].ownOpen
	}
	if p.reclaims(e) {
		for v := range p.fs.t {
			if t := &p.fs.t[v]; int32(v) != ti && t.inUse > t.g {
				b += t.crossOpen
			}
		}
	}
	return b
}

// fairVictims is the state of one search for victims.
type fairVictims struct {
	cross bool    // the other teams' borrowed batch jobs may be taken
	sess  bool    // then, as a last resort, their borrowed sessions
	share float64 // Kueue's share of e's team once e runs
	own   int     // cursor in e's team's own list
}

// startFairVictims begins a search for e's victims.
func (p *pass) startFairVictims(e *entry, fv *fairVictims) {
	t := &p.fs.t[p.jteam[e.job]]
	cross := p.reclaims(e)
	*fv = fairVictims{cross: cross, sess: cross, share: t.share(t.inUse + int(e.gpus)*unit), own: t.ownLo}
	if cross {
		for i := range p.fs.t {
			v := &p.fs.t[i]
			for v.crossLo < len(v.cross) && p.runs[v.cross[v.crossLo]].state != runOpen {
				v.crossLo++
			}
			for v.sessLo < len(v.sess) && p.runs[v.sess[v.sessLo]].state != runOpen {
				v.sessLo++
			}
			v.cur, v.scur, v.tent = v.crossLo, v.sessLo, 0
		}
	}
}

// endFairVictims forgets the tentative victims of a search.
func (p *pass) endFairVictims(fv *fairVictims) {
	if fv.cross {
		for i := range p.fs.t {
			p.fs.t[i].tent = 0
		}
	}
}

// nextFairVictim returns the next victim for e, as an index in rents, or
// -1. First the borrowed batch jobs of other teams, when e may reclaim:
// from the team furthest over its guarantee (Kueue's share, recomputed
// after each victim), its lowest-ranked job first, only while that team
// is still over its guarantee and only if e's team ends no further over
// its guarantee than the victim's (Kueue's LessThanOrEqualToFinalShare).
// Then, when the policy preempts, e's own team's batch jobs ranked below
// it, lowest first. Last, when those cannot free enough and no batch job
// that borrows is still short of its minimum runtime (it would do first,
// once it may be reclaimed), the borrowed sessions of other teams, by
// the same rules as the batch jobs.
func (p *pass) nextFairVictim(e *entry, fv *fairVictims) int32 {
	me := p.jteam[e.job]
	if fv.cross {
		if i := p.nextCross(me, fv, false); i >= 0 {
			return i
		}
		fv.cross = false
	}
	if p.ownPreempt {
		if i := p.nextOwn(e, fv); i >= 0 {
			return i
		}
	}
	if fv.sess {
		if !p.youngBatchBorrows(me) {
			if i := p.nextCross(me, fv, true); i >= 0 {
				return i
			}
		}
		fv.sess = false
	}
	return -1
}

// nextCross returns the next borrowed job of another team than me that
// a job of me may reclaim: a batch job, or a session (sess), as an index
// in rents; -1 when none is left.
func (p *pass) nextCross(me int32, fv *fairVictims, sess bool) int32 {
	for {
		best := int32(-1)
		var bestShare float64
		for i := range p.fs.t {
			v := &p.fs.t[i]
			list, cur := v.candidates(sess)
			if int32(i) == me || *cur >= len(list) || v.inUse-v.tent <= v.g {
				continue
			}
			if s := v.share(v.inUse - v.tent); best < 0 || s > bestShare || s == bestShare && v.name < p.fs.t[best].name {
				best, bestShare = int32(i), s
			}
		}
		if best < 0 {
			return -1
		}
		v := &p.fs.t[best]
		list, cur := v.candidates(sess)
		for *cur < len(list) {
			ri := list[*cur]
			*cur++
			r := &p.runs[ri]
			if r.state != runOpen {
				continue
			}
			n := p.jheld[r.job]
			if v.share(v.inUse-v.tent-n) < fv.share {
				continue // Kueue's rule: e's team would end further over
			}
			v.tent += n
			return r.ent
		}
	}
}

// candidates returns the team's reclaim candidates of one kind, batch
// jobs or sessions, and the cursor into them.
func (t *fteam) candidates(sess bool) ([]int32, *int) {
	if sess {
		return t.sess, &t.scur
	}
	return t.cross, &t.cur
}

// nextOwn returns the next job of e's own team that the policy ranks
// below e, lowest first, as an index in rents; -1 when none is left.
func (p *pass) nextOwn(e *entry, fv *fairVictims) int32 {
	t := &p.fs.t[p.jteam[e.job]]
	for t.ownLo < len(t.own) && p.runs[t.own[t.ownLo]].state != runOpen {
		t.ownLo++
	}
	fv.own = max(fv.own, t.ownLo)
	for fv.own < len(t.own) {
		ri := t.own[fv.own]
		r := &p.runs[ri]
		fv.own++
		if r.state != runOpen || r.n <= 0 || p.rsvStarted(ri) {
			continue
		}
		if compareKeys(&p.rents[r.ent], e) < 0 {
			break // the policy ranks it above e: and the rest
		}
		return r.ent
	}
	fv.own = len(t.own)
	return -1
}

// youngBatchBorrows tells whether a team other than me, beyond its
// guarantee, has batch jobs that borrow but have not yet run the minimum
// runtime: they are reclaimed, once they may be, before any session.
func (p *pass) youngBatchBorrows(me int32) bool {
	for i := range p.fs.t {
		if v := &p.fs.t[i]; int32(i) != me && v.inUse > v.g && v.youngBatch > 0 {
			return true
		}
	}
	return false
}

// teamKeep records that a running job keeps its GPUs: no longer a
// candidate.
func (p *pass) teamKeep(r *runJob) {
	t := &p.fs.t[p.jteam[r.job]]
	if p.ownPreempt && p.s.Jobs[r.job].Class.preemptible() {
		t.ownOpen -= int(r.n)
	}
	if r.flags&runEligible != 0 {
		t.crossOpen -= int(r.n)
	}
}

// teamStart moves a job's GPUs into (sign +1) or out of (-1) its team's
// and user's counts.
func (p *pass) teamStart(job int32, sign int) {
	p.fs.t[p.jteam[job]].inUse += p.jheld[job] * sign
	if u := p.juser[job]; u >= 0 {
		p.uheld[u] += int32(jobGPUs(&p.s.Jobs[job]) * sign)
	}
}

// teamPreempted follows the preemption of job (reclaimed or not). Its team
// may now have room within its guarantee: if it has room for a job of its
// preempted in this pass, nothing more is lent in this pass (lendCheck).
// After a reclaim, the team's jobs deferred to the borrowers also get
// another turn among the jobs within their guarantee.
func (p *pass) teamPreempted(job int32, reclaim bool) {
	v := p.jteam[job]
	t := &p.fs.t[v]
	if t.smallest < 0 || p.jheld[job] < p.jheld[t.smallest] {
		t.smallest = job
	}
	if !reclaim {
		return // the job it makes way for starts next: see start
	}
	p.lendCheck(v)
	if t.inUse >= t.g {
		return
	}
	p.later.resetTeam(v)
}

// lendCheck stops lending for the rest of the pass when team v, as it now
// stands, has room within its guarantee for one of its jobs preempted in
// this pass. That job waits from the next pass on within its guarantee,
// and would reclaim whatever was lent meanwhile: lending it now would make
// the two teams reclaim from each other in turn.
func (p *pass) lendCheck(v int32) {
	t := &p.fs.t[v]
	if !p.lendStop && t.smallest >= 0 && t.inUse+p.jheld[t.smallest] <= t.g {
		p.lendStop, p.lendBy = true, t.smallest
	}
}

// mayRestore tells whether a preempted job may keep running after all.
// Under fair share it may not: its team no longer counts it, and may have
// used the room since, or let it be lent. Nor may a job whose user would
// pass a cap (a job of the user may have started on other GPUs
// meanwhile).
func (p *pass) mayRestore(r *runJob) bool {
	if p.fair {
		return false
	}
	u := p.juser[r.job]
	return u < 0 || int(p.uheld[u])+jobGPUs(&p.s.Jobs[r.job]) <= int(p.ucap[u])
}

// markBorrowed finds the jobs that run beyond their team's guarantee
// after the pass: a team's running jobs, in the policy's order, fill its
// guarantee; those that pass it borrow.
func (p *pass) markBorrowed() {
	order := p.order[:0]
	for k := range p.ents {
		if p.outcome[p.ents[k].job] == outStarted {
			order = append(order, int32(k))
		}
	}
	for k := range p.rents {
		if p.outcome[p.rents[k].job] == outRunning {
			order = append(order, -1-int32(k))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		ea, eb := p.refEntry(a), p.refEntry(b)
		if ta, tb := p.jteam[ea.job], p.jteam[eb.job]; ta != tb {
			return int(ta - tb)
		}
		if c := p.classFirst(ea, eb); c != 0 {
			return c
		}
		return compareKeys(ea, eb)
	})
	p.order = order
	if p.startedSharing() {
		started := make(map[int64][]gpu.Ref, len(p.d.Starts))
		for _, st := range p.d.Starts {
			started[st.JobID] = st.GPUs
		}
		p.heldGPUs(started)
	}
	cum, team := 0, int32(-1)
	borrows := p.borrows[:0]
	for _, r := range order {
		e := p.refEntry(r)
		if p.jteam[e.job] != team {
			team, cum = p.jteam[e.job], 0
		}
		if p.s.Jobs[e.job].State == Leaving {
			continue // it holds its GPUs until it exits; nobody reclaims it
		}
		cum += p.jheld[e.job]
		if cum <= p.fs.t[team].g {
			continue
		}
		borrows = append(borrows, borrow{e.id, p.reclaimableAt(e)})
	}
	slices.SortFunc(borrows, func(a, b borrow) int { return cmp.Compare(a.id, b.id) })
	p.borrows = borrows
	p.d.Borrowed, p.d.ReclaimableAt = make([]int64, len(borrows)), make([]float64, len(borrows))
	for k, b := range borrows {
		p.d.Borrowed[k], p.d.ReclaimableAt[k] = b.id, b.at
	}
}

// borrow is a job of Decisions.Borrowed and when it may be reclaimed.
type borrow struct {
	id int64
	at float64
}

// reclaimableAt is when the job of entry e, running after the pass and
// borrowed, may be reclaimed: once it has run its minimum runtime
// (minRunOf) since it last started, now for a job started in the pass.
func (p *pass) reclaimableAt(e *entry) float64 {
	j := &p.s.Jobs[e.job]
	start := j.LastStartTime
	if p.outcome[e.job] == outStarted {
		start = p.now
	}
	return start + p.minRunOf(j)
}

// startedSharing tells whether a job started in the pass shares its GPU:
// the GPUs of the jobs on the GPUs it joins or takes are then counted by
// their shares (heldGPUs), though no running job shared one when the pass
// began.
func (p *pass) startedSharing() bool {
	for _, i := range p.startJob {
		if p.s.Jobs[i].Sharing {
			return true
		}
	}
	return false
}

// fairCause refines a capacity wait under fair share: a job that may
// reclaim but waits for borrowed jobs to reach their minimum runtime
// (WaitReclaim, with a recheck then), or a job that would borrow while
// other teams hold the busy GPUs (WaitTeamShare). It returns the cause and
// when the reclaim may happen.
func (p *pass) fairCause(e *entry, r rule, reclaimable int) (WaitCause, float64) {
	me := p.jteam[e.job]
	t := &p.fs.t[me]
	if p.reclaims(e) {
		young, at := 0, 0.0
		for i := range p.fs.t {
			v := &p.fs.t[i]
			if int32(i) != me && v.inUse > v.g && v.youngGPUs > 0 {
				young += v.youngGPUs
				if at == 0 || v.youngAt < at {
					at = v.youngAt
				}
			}
		}
		if young > 0 && r.n <= p.cl.free+reclaimable+young && at > p.now {
			return WaitReclaim, at
		}
		return WaitCapacity, 0
	}
	if t.inUse+r.n*unit > t.g {
		others := 0
		for i := range p.fs.t {
			if int32(i) != me {
				others += p.fs.t[i].inUse
			}
		}
		if others > 0 {
			return WaitTeamShare, 0
		}
	}
	return WaitCapacity, 0
}

// appendTeam appends "team NAME holds H of its G guaranteed GPUs", or
// "team NAME holds H GPUs, B beyond its guarantee of G".
func (p *pass) appendTeam(b []byte, t *fteam) []byte {
	b = append(b, "team "...)
	b = appendName(b, t.name)
	b = append(b, " holds "...)
	h := t.inUse
	b = appendGPUs(b, h)
	switch {
	case t.g == 0:
		return append(b, " GPUs and has no guarantee"...)
	case h > t.g:
		b = append(b, " GPUs, "...)
		b = appendGPUs(b, h-t.g)
		b = append(b, " beyond its guarantee of "...)
		return appendGPUs(b, t.g)
	}
	b = append(b, " of its "...)
	b = appendGPUs(b, t.g)
	return append(b, " guaranteed GPUs"...)
}

func appendName(b []byte, name string) []byte {
	if name == "" {
		return append(b, `""`...)
	}
	return append(b, name...)
}

// waitUserCap records a job whose user would pass the team's cap.
func (p *pass) waitUserCap(e *entry, u int32) {
	if p.sc.cfg.OmitWaits {
		return
	}
	j := &p.s.Jobs[e.job]
	b := appendNeeds(p.buf[:0], int(e.gpus))
	if c := int(p.ucap[u]); int(e.gpus) > c {
		// No amount of waiting helps: only a higher cap.
		b = append(b, ", more than the cap of "...)
		b = appendCount(b, c, " GPU per user of ", " GPUs per user of ")
		b = appendName(b, j.User)
		b = append(b, " in team "...)
		b = appendName(b, j.Team)
		b = append(b, ": it cannot start until the cap is raised"...)
		p.addWait(e, WaitUserCap, b)
		return
	}
	b = append(b, "; user "...)
	b = appendName(b, j.User)
	b = append(b, " holds "...)
	b = appendCount(b, int(p.uheld[u]), " GPU in team ", " GPUs in team ")
	b = appendName(b, j.Team)
	b = append(b, ", whose cap per user is "...)
	b = strconv.AppendInt(b, int64(p.ucap[u]), 10)
	p.addWait(e, WaitUserCap, b)
}

// waitLending records a job that would borrow while a job within its
// team's guarantee waits.
func (p *pass) waitLending(e *entry) {
	if p.sc.cfg.OmitWaits {
		return
	}
	v := p.jteam[e.job]
	t := &p.fs.t[v]
	m := &p.lendMemo
	key := lendKey{gpus: e.gpus, team: v, by: p.lendBy, inUse: t.inUse, g: t.g}
	if !m.ok || m.key != key {
		by := &p.s.Jobs[p.lendBy]
		b := appendNeeds(m.text[:0], int(e.gpus))
		b = append(b, ", which would take it beyond its team's guarantee ("...)
		b = p.appendTeam(b, t)
		b = append(b, "); no GPUs are lent while job "...)
		b = strconv.AppendInt(b, by.ID, 10)
		if by.Team == p.s.Jobs[e.job].Team {
			// Its own team's: "of team vision" read as another team.
			b = append(b, " of its own team, within the guarantee, waits for GPUs"...)
		} else {
			b = append(b, " of team "...)
			b = appendName(b, by.Team)
			b = append(b, ", within its guarantee, waits for GPUs"...)
		}
		m.key, m.text, m.ok = key, b, true
	}
	b := append(p.buf[:0], m.text...)
	if len(p.rsv) > 0 || p.rsvBehind == e.job {
		b = p.appendReserved(b, e)
	}
	p.addWait(e, WaitTeamShare, b)
}

// lendText is the words of waitLending's last reason before its
// reservations' part, and what they were made of. While lending is
// stopped at a long queue, thousands of jobs of one team and size wait
// for the same words.
type lendText struct {
	ok   bool
	key  lendKey
	text []byte
}

// lendKey is what waitLending's words say: the job's GPUs, its team and
// that team's GPUs, and the job lending waits for (whose team is the
// job's or not as team says).
type lendKey struct {
	gpus     int32
	team, by int32
	inUse, g int
}

// appendFairCapacity appends, after "needs N GPUs; F free", why preemption
// does not help under fair share.
func (p *pass) appendFairCapacity(b []byte, e *entry, cause WaitCause, reclaimable int, at float64) []byte {
	t := &p.fs.t[p.jteam[e.job]]
	switch cause {
	case WaitReclaim:
		b = append(b, "; "...)
		b = p.appendTeam(b, t)
		b = append(b, "; GPUs lent to other teams may be reclaimed in "...)
		b = appendNum(b, at-p.now)
		b = append(b, " s, once their jobs have run "...)
		b = appendNum(b, p.youngRunAt(at))
		return append(b, " s"...)
	case WaitTeamShare:
		b = append(b, "; "...)
		b = p.appendTeam(b, t)
		b = append(b, ", so this job would borrow: it may take idle GPUs, never other teams' jobs"...)
	}
	// reclaimable is at least what preemption could free (fairBound):
	// "only" where even that is short of the job's need. Where it is
	// not, the walk found no victims among them (its own team's jobs
	// ranked above it, say): the words say so, not "only 2 more" to a
	// job that needs 1.
	if reclaimable > 0 && max(p.cl.free, 0)+reclaimable < int(e.gpus) {
		b = append(b, "; preempting what it may would free only "...)
		b = strconv.AppendInt(b, int64(reclaimable), 10)
		b = append(b, " more"...)
	} else if cause == WaitCapacity && p.cl.free < p.cl.capacity {
		if p.reclaims(e) && reclaimable == 0 {
			b = append(b, "; "...)
			b = p.appendTeam(b, t)
			b = append(b, ", but no other team has lent it GPUs it could reclaim"...)
		} else {
			b = append(b, "; the busy GPUs are held by jobs it may not preempt"...)
		}
	}
	return b
}

// reclaimReason says why a borrowed job gives its GPUs back.
func (p *pass) reclaimReason(victim, by *entry) string {
	bt := &p.fs.t[p.jteam[by.job]]
	vt := &p.fs.t[p.jteam[victim.job]]
	b := append(p.buf[:0], "reclaimed by team "...)
	b = appendName(b, bt.name)
	b = append(b, " under its guarantee, for job "...)
	b = strconv.AppendInt(b, by.id, 10)
	b = append(b, " ("...)
	b = p.appendTeam(b, bt)
	b = append(b, "); this job borrowed: "...)
	b = p.appendTeam(b, vt)
	if !p.s.Jobs[victim.job].Class.preemptible() {
		b = append(b, "; "...)
		b = appendSessionReclaim(b)
	}
	p.buf = b
	return string(b)
}

// appendSessionReclaim says why a session was reclaimed after all.
func appendSessionReclaim(b []byte) []byte {
	return append(b, "a session is reclaimed only as a last resort: the batch jobs that borrow could not free enough GPUs"...)
}
