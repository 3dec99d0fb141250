package sched

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// Reservations and backfill (EASY backfilling; docs/scheduling.md,
// "Reservations"). A job that has waited past its bound (Config.ReserveAfterS,
// or its team's Team.ReserveAfterS) and cannot start when the walk reaches
// it gets the GPUs that can be freed earliest for its placement rule,
// estimated from the running jobs' time limits and, where a job declared
// none, from the distribution of job GPU-time (endAt). Of such jobs, the
// first MaxReservations get one, the biggest first and of jobs as big
// the earliest deadline, not the first the walk reaches (rsvRoom,
// compareDue; under fair share the jobs that have not had their lend
// first); the jobs after them in the walk may start on reserved GPUs
// only
//
//   - if they end before the reservation's start by their own time limit,
//     or
//   - under a preemptive policy without fair share: they are then
//     preemptible there. Once every other holder of the reserved GPUs
//     has left, the reserved job preempts the jobs that started on them
//     after it became due and that rank below it as waiting jobs, and
//     takes the GPUs;
//   - if they are interactive sessions, which no reservation holds back
//     and none preempts: the reserved job waits for them.
//
// Under a preemptive policy a reservation has a deadline: its job's due
// time plus its bound (twice the bound since it was submitted), less
// Config.HandoverS. From then it takes its GPUs from any batch job, but
// one due for a reservation itself, one that started due before it in
// that order (dueFirst), and another team's guaranteed work (overdue,
// overdueVictim), and the jobs ranked above it are held off
// them (rsvEarlyHold); before, a session that would run past it does not
// start on them, whatever its rank. A job of one GPU is never reserved.
// With a lead (Config.ReserveLeadS: the bound is when a job must start),
// a job is due its lead before its bound and its deadline is the bound
// (dueWait, deadlineOf). Past the deadline a GPU that several batch jobs
// share is taken from all of them together (sharedVictims), never from
// a session.
//
// Free GPUs outside a reservation come first. Free reserved GPUs are
// held back for the rest of the walk by marking them busy (rsvHeld); a
// job that may use them has them opened while it is decided
// (openReserved) and held back again after (closeReserved). Running
// jobs on reserved GPUs are kept: no job ranked below the reserved one
// preempts them for those GPUs.
//
// Kept: the caller hands the last pass's reservations back
// (Snapshot.Reservations), and a job that held one keeps it while it
// waits and no job due before it waits too: no other job due takes its
// place among the MaxReservations, even one ranked above it, nor
// reserves its GPUs before the walk reaches it; it keeps the same GPUs
// while they suit it (rsvKeptSlots), and its start only moves earlier
// (keptFrom). With equal bounds a job as big due later has a later
// deadline, so that only a bigger job, a job due again after a run (its
// wait resumes where it stopped) or one of a team with a shorter bound
// takes its place. Under fair share a borrower that
// holds one is decided at its rank, so it starts on its GPUs once they
// are free rather than being deferred behind the jobs within their
// guarantee, which took them. Without kept reservations each pass
// reserves afresh from its snapshot: the reservation went from job to job
// as ranks and estimates changed, and an 8-GPU job on a busy machine
// waited many times its bound (issue 30).

// DefaultMaxReservations is how many jobs hold a reservation at once
// when Config.MaxReservations is zero: one, as EASY backfilling.
const DefaultMaxReservations = 1

// maxReservations bounds Config.MaxReservations.
const maxReservations = 1024

// Reservation is the GPUs a pass holds back for a waiting job that has
// waited past its bound and cannot start.
type Reservation struct {
	JobID int64
	// GPUs are the GPUs reserved, in node then index order; nil in
	// count placement, which names no GPUs.
	GPUs []gpu.Ref
	// Count is how many GPUs are reserved: the job's.
	Count int
	// FromS is when the GPUs are expected to be free, on the snapshot's
	// clock: never before Snapshot.Now. An estimate: the job starts when
	// the GPUs are free, earlier or later.
	FromS float64
	// DueS is when the job became due for a reservation: when its wait
	// reached its bound. Jobs that started on the reserved GPUs since
	// then, ranked below it as waiting jobs, make way for it under a
	// preemptive policy.
	DueS float64
}

// GPUText names the reserved GPUs for people: "GPUs node-3:0-7", "GPUs
// node-1:6-7 and node-2:0-5", "GPU node-0:3"; "8 GPUs" in count
// placement.
func (r Reservation) GPUText() string {
	if len(r.GPUs) == 0 {
		if r.Count == 1 {
			return "1 GPU"
		}
		return strconv.Itoa(r.Count) + " GPUs"
	}
	var b strings.Builder
	if len(r.GPUs) == 1 {
		b.WriteString("GPU ")
	} else {
		b.WriteString("GPUs ")
	}
	for i := 0; i < len(r.GPUs); {
		k := i
		for k < len(r.GPUs) && r.GPUs[k].Node == r.GPUs[i].Node {
			k++
		}
		if i > 0 {
			if k == len(r.GPUs) {
				b.WriteString(" and ")
			} else {
				b.WriteString(", ")
			}
		}
		b.WriteString(r.GPUs[i].Node)
		b.WriteByte(':')
		for m := i; m < k; {
			e := m
			for e+1 < k && r.GPUs[e+1].Index == r.GPUs[e].Index+1 {
				e++
			}
			if m > i {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(r.GPUs[m].Index))
			if e > m {
				b.WriteByte('-')
				b.WriteString(strconv.Itoa(r.GPUs[e].Index))
			}
			m = e + 1
		}
		i = k
	}
	return b.String()
}

// Clause is what the core's wait reason of the reserved job says of its
// reservation at time now: "GPUs node-3:0-7 reserved for it, expected
// free in 420 s" ("expected free now" once that time has come). A
// caller that words it its own way (the engine: "GPUs node-3:0-7
// reserved for this job", leaving the start to its forecast) finds this
// clause in the reason and replaces it.
func (r Reservation) Clause(now float64) string {
	b := []byte(r.GPUText())
	b = append(b, " reserved for it, expected free "...)
	if in := r.FromS - now; in >= 0.5 {
		b = append(b, "in "...)
		b = appendNum(b, in)
		b = append(b, " s"...)
	} else {
		b = append(b, "now"...)
	}
	return string(b)
}

// rsvState is one reservation during the pass.
type rsvState struct {
	job  int32 // the reserved job, an index in Snapshot.Jobs
	ent  entry // its entry, to rank other jobs against it
	n    int
	from float64
	due  float64
	// deadline is when the job will have waited its bound again since
	// it became due (due plus its bound): the latest a job it waits for
	// may end (endBy), and, under a preemptive policy, when it takes its
	// GPUs from any batch job (overdue).
	deadline float64
	slots    []int32 // nodes mode: the reserved slots, ascending
	// held are its free slots held back (nodes mode), or, in count mode,
	// the free GPUs held back (heldN).
	held  []int32
	heldN int
	// starts is how many starts the pass had made when it reserved: the
	// later ones are of jobs after it in the walk.
	starts int
}

// endBy is when a job that starts on reservation k's GPUs and that the
// reserved job would wait for (it is not preempted for it) must end by
// its time limit: the reservation's expected start, and, under a
// preemptive policy, never after its deadline while that is ahead (past
// it, the reserved job waits for jobs it may not preempt, expected gone
// by its start). The expected start is an estimate, often late for jobs that
// declare no limit (the distribution of job GPU-time's median); the
// deadline is the promise: a reserved job waits at most its bound once
// due, and a session with a limit that starts after it is due and runs
// past that would break it (issue 30: on mixed-spec such sessions,
// started while the estimate said half an hour, kept 8-GPU jobs waiting
// up to 2.5 times their bound).
func (p *pass) endBy(k *rsvState) float64 {
	if p.rsvPreempt && p.now < k.deadline {
		return min(k.from, k.deadline)
	}
	return k.from
}

// rsvBegin prepares the pass for reservations, once its cluster is
// reset and before scan: whether any job may get one, and the teams'
// bounds. scan then calls rsvScan for each pending job.
func (p *pass) rsvBegin() {
	p.rsv = p.rsv[:0]
	p.rsvFree, p.rsvJust, p.rsvBehind, p.rsvPending, p.rsvNext, p.rsvDueLeft = 0, -1, -1, -1, 0, 0
	p.rsvOpened, p.rsvOpenN = p.rsvOpened[:0], 0
	p.rsvWithin = p.rsvWithin[:0]
	p.startJob = p.startJob[:0]
	p.runEnd, p.runStart, p.runDue = p.runEnd[:0], p.runStart[:0], p.runDue[:0]
	clear(p.rsvBound)
	p.rsvOn, p.rsvAnyLimit = false, false
	p.rsvFreshDue, p.rsvFirst, p.rsvHead = false, p.rsvFirst[:0], 0
	clear(p.rsvKept)
	p.rsvHolder, p.rsvHolders, p.rsvKeptSlot = p.rsvHolder[:0], p.rsvHolders[:0], p.rsvKeptSlot[:0]
	if p.pol.blocks {
		return // fifo: the first job that does not fit blocks the line anyway
	}
	on := p.sc.cfg.ReserveAfterS > 0
	for i := range p.s.Teams {
		t := &p.s.Teams[i]
		if v := t.ReserveAfterS; v != 0 && !math.IsNaN(v) {
			if p.rsvBound == nil {
				p.rsvBound = map[string]float64{}
			}
			if _, dup := p.rsvBound[t.Name]; !dup {
				p.rsvBound[t.Name] = v
				on = on || v > 0
			}
		}
	}
	if !on || math.IsNaN(p.now) || math.IsInf(p.now, 0) {
		// A clock that is not a time has no "earliest": no reservation
		// (FuzzSchedule: a +Inf clock made one due at NaN).
		return
	}
	p.rsvOn = true
	p.rsvMax = p.sc.cfg.MaxReservations
	p.rsvKeptBegin()
	p.rsvPreempt = p.ownPreempt
	p.rsvIsDue = resize(p.rsvIsDue, len(p.s.Jobs))
	clear(p.rsvIsDue)
	if p.fair {
		p.rsvWithin = resize(p.rsvWithin, len(p.s.Jobs))
		clear(p.rsvWithin)
	}
	if !p.count {
		p.rsvOwner = resize(p.rsvOwner, len(p.cl.busy))
		for s := range p.rsvOwner {
			p.rsvOwner[s] = -1
		}
		p.rsvHeld = resize(p.rsvHeld, len(p.cl.busy))
		clear(p.rsvHeld)
	}
}

// rsvScan notes pending job j (at index i, asking gpus GPUs): whether it
// declared a limit, whether it is due for a reservation, and else when it
// will be.
func (p *pass) rsvScan(i int32, j *Job, gpus int32) {
	if hasLimit(j) {
		p.rsvAnyLimit = true
	}
	b := p.boundOf(j)
	if !(b > 0) || gpus < 2 {
		return // a job of one GPU is never reserved (tryReserve)
	}
	w, d := waitedS(j, p.now), p.dueWait(b)
	if w >= d {
		p.rsvIsDue[i] = true
		p.rsvDueLeft++
		lent := p.rsvLent(j)
		p.rsvFreshDue = p.rsvFreshDue || !lent
		if int(gpus) <= p.cl.capacity-p.avoidedCap(j) {
			// Not one that no reservation can hold (tryReserve):
			// first of all by its size, it would keep every job
			// the walk reaches before it from one.
			k := p.dueKey(j, lent, p.now)
			k.job = i
			p.rsvFirst = append(p.rsvFirst, k)
		}
		if len(p.rsvKept) > 0 {
			if k, ok := p.rsvKept[j.ID]; ok {
				p.rsvHolder[i] = k + 1
				p.rsvHolders = append(p.rsvHolders, i)
			}
		}
	} else if due := p.now - w + d; due > p.now && (p.rsvNext == 0 || due < p.rsvNext) {
		p.rsvNext = due
	}
}

// avoidedCap is how many GPUs the schedulable nodes that job j avoids
// have (Job.AvoidNodes): none of them is reserved for it (mask).
func (p *pass) avoidedCap(j *Job) int {
	if p.count || len(j.AvoidNodes) == 0 {
		return 0
	}
	n := 0
	for k, name := range j.AvoidNodes {
		i, ok := p.cl.find(name)
		if !ok || !p.cl.nodes[i].sched || slices.Contains(j.AvoidNodes[:k], name) {
			continue
		}
		n += int(p.cl.nodes[i].n)
	}
	return n
}

// rsvDue is a job due for a reservation, as rsvScanEnd orders them.
type rsvDue struct {
	job      int32
	lent     bool // rsvLent: under fair share, reserved after the jobs that have not had their lend
	late     bool // lateBounds past its deadline: reserved before the jobs that are not, whatever their size
	deadline float64
	id       int64
	gpus     int32
}

// compareDue orders the jobs due for a reservation: under fair share
// those that have not had their lend (rsvLent) first; then the late
// (lateBounds); then, among those that are not, the jobs of more GPUs
// first (reservations are for the jobs that free GPUs do not gather
// for: a small job finds GPUs outside them sooner); then the earliest
// deadline, then the lowest ID.
func compareDue(a, b rsvDue) int {
	if a.lent != b.lent {
		if b.lent {
			return -1
		}
		return 1
	}
	if a.late != b.late {
		if a.late {
			return -1
		}
		return 1
	}
	if a.gpus != b.gpus && !a.late {
		return cmp.Compare(b.gpus, a.gpus)
	}
	if c := cmp.Compare(a.deadline, b.deadline); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// boundOf is job j's bound: its team's when the team sets one, else the
// server's; 0 or less: never reserved.
func (p *pass) boundOf(j *Job) float64 {
	if len(p.rsvBound) > 0 {
		if v, ok := p.rsvBound[j.Team]; ok {
			return v
		}
	}
	return p.sc.cfg.ReserveAfterS
}

// rsvWalkOn tells whether the walk must go on, though nothing else can
// start, to reach a job due for a reservation the pass may still give
// (OmitWaits): the engine's walk, which goes to the end, would.
func (p *pass) rsvWalkOn() bool {
	return p.rsvDueLeft > 0 && len(p.rsv) < p.rsvMax
}

// rsvAtRank tells whether pending entry e, which would borrow under fair
// share, is due for a reservation the pass may still give: it is then
// decided at its policy rank, not deferred to the borrowers (teamHold).
func (p *pass) rsvAtRank(e *entry) bool {
	return p.rsvOn && p.rsvIsDue[e.job] && p.rsvRoom(e.job)
}

// rsvRoom tells whether job i may get a reservation now: fewer than
// MaxReservations are given, and i is among the first of the jobs due
// that the walk has not taken yet, in the order rsvScanEnd gave them
// (compareDue: the biggest first, then the earliest deadline), as many
// as there are reservations left. The walk reaches the jobs by their
// policy rank: given to the first due job the walk reached, a
// reservation went to a job that another due job, which the walk reached
// later, then preempted at its own deadline (issue 30: the demo's 8-GPU
// jobs, preempted seconds after their reservations started them). A job
// due that the walk reaches after the first ones, which start or are
// reserved, gets one the next pass.
func (p *pass) rsvRoom(i int32) bool {
	left := p.rsvMax - len(p.rsv)
	if left <= 0 {
		return false
	}
	// Scan from the head, dropping the jobs the walk has taken (all but
	// i, which it may be deciding); the ones kept, at most left+1, move
	// to just before where the scan stopped, the new head.
	o := p.rsvFirst
	keep := p.rsvKeep[:0]
	room, r := false, p.rsvHead
	for ; r < len(o) && left > 0; r++ {
		d := o[r]
		if d.job == i {
			keep = append(keep, int32(r))
			room = true
			r++
			break
		}
		if p.rsvIsDue[d.job] {
			keep = append(keep, int32(r))
			left--
		}
	}
	h := r - len(keep)
	for k := len(keep) - 1; k >= 0; k-- {
		o[h+k] = o[keep[k]]
	}
	p.rsvHead = h
	p.rsvKeep = keep[:0]
	return room
}

// rsvScanEnd, once scan has noted every pending job, orders the jobs due
// for a reservation (compareDue) and drops from the holders of kept
// reservations (rsvHolders) those not among the first MaxReservations of
// them: their GPUs are no longer kept from the other reservations nor
// held off the jobs ranked above them (keptSlots, rsvEarlyBegin). One
// that gets a reservation in its turn all the same (a job before it
// started instead) is reserved from its kept one (rsvKeptOf).
func (p *pass) rsvScanEnd() {
	slices.SortFunc(p.rsvFirst, compareDue)
	if len(p.rsvHolders) == 0 {
		return
	}
	first := p.rsvFirst[:min(p.rsvMax, len(p.rsvFirst))]
	p.rsvHolders = slices.DeleteFunc(p.rsvHolders, func(i int32) bool {
		return !slices.ContainsFunc(first, func(d rsvDue) bool { return d.job == i })
	})
}

// rsvLent tells whether job j, under fair share, has had the lend its
// reservation may take from another team once ("Reservations under fair
// share", rule 5): it asks more GPUs than its team's guarantee, so it
// runs only on another team's, and it has run. Such a job's reservation
// may take no other team's guaranteed work, and it may wait on it for
// as long as that team keeps its guarantee busy; held by it, the one
// reservation kept the jobs due after it, which had not had their lend,
// from theirs (issue 30: on mixed-8gpu with teams and a 30 s minimum
// runtime, an 8-GPU job waited 924 s for a bound of 300 s behind a
// reclaimed one).
func (p *pass) rsvLent(j *Job) bool {
	return p.lentHaving(j, j.ExecutedS)
}

// lentHaving is rsvLent of job j once it had run executed seconds.
func (p *pass) lentHaving(j *Job, executed float64) bool {
	return p.fair && executed > 0 && executed >= p.lendS(j) && p.beyondGuarantee(j)
}

// lendS is how long, in all its runs, a job beyond its team's guarantee
// runs before it has had its lend (rsvLent): the run a reclaim leaves it
// once it started due (minRunOf), its bound or the minimum runtime,
// whichever is longer. A job cut sooner, by a reservation past its
// deadline or by its own team, has not had it: before (issue 30), an
// 8-GPU job of the demo's stream preempted 25 s after it started by an
// older job's reservation then waited 12,700 s as one that had.
func (p *pass) lendS(j *Job) float64 {
	return max(p.sc.minRun, p.boundOf(j))
}

// lendLeft tells whether job j, due for a reservation, may still take
// another team's guaranteed work past its deadline (overdueTakes): it
// has never run, or it asks more GPUs than its team's guarantee and has
// run less than its lend (lendS), cut before it by a reservation or its
// own team. A job that runs within its team's guarantee and has run is
// reclaimed after the minimum runtime alone, and would take the GPUs
// back at once.
func (p *pass) lendLeft(j *Job) bool {
	return !(j.ExecutedS > 0) || p.beyondGuarantee(j) && j.ExecutedS < p.lendS(j)
}

// beyondGuarantee tells whether job j, under fair share, asks more GPUs
// than its team's guarantee: it runs only on GPUs other teams lend.
func (p *pass) beyondGuarantee(j *Job) bool {
	g := 0 // a job of no listed team borrows every GPU it runs on
	if t, ok := p.fs.byName[j.Team]; ok {
		g = p.fs.t[t].g
	}
	return jobGPUs(j)*unit > g
}

// rsvHolds tells whether job i held a reservation in the caller's last
// pass (Snapshot.Reservations) and is still due: it keeps it.
func (p *pass) rsvHolds(i int32) bool {
	return len(p.rsvHolder) > 0 && p.rsvHolder[i] > 0
}

// rsvKeptOf is the reservation job i held in the last pass, nil when none.
func (p *pass) rsvKeptOf(i int32) *Reservation {
	if !p.rsvHolds(i) {
		return nil
	}
	return &p.s.Reservations[p.rsvHolder[i]-1]
}

// rsvKeptBegin indexes the reservations of the last pass by job, once
// reservations are on.
func (p *pass) rsvKeptBegin() {
	if len(p.s.Reservations) == 0 {
		return
	}
	if p.rsvKept == nil {
		p.rsvKept = make(map[int64]int32, len(p.s.Reservations))
	}
	for k, r := range p.s.Reservations {
		if _, dup := p.rsvKept[r.JobID]; !dup {
			p.rsvKept[r.JobID] = int32(k)
		}
	}
	p.rsvHolder = resize(p.rsvHolder, len(p.s.Jobs))
	clear(p.rsvHolder)
}

// reserveOnly decides pending entry e, which peek returned: a borrower
// due for a reservation, reached while lending is stopped. It gets its
// reservation but does not start, even on free GPUs (they are held for
// it), and waits as every borrower then does.
func (p *pass) reserveOnly(e *entry) {
	p.mask(e)
	e = p.pop(e)
	p.rsvNoStart = true
	p.tryReserve(e)
	p.rsvNoStart = false
	p.waitLending(e)
	p.rsvCommit()
}

// rsvDecided notes that the walk has taken entry e out of the line.
func (p *pass) rsvDecided(e *entry) {
	if p.rsvDueLeft > 0 && p.rsvIsDue[e.job] {
		p.rsvIsDue[e.job] = false
		p.rsvDueLeft--
	}
}

// rsvMayOpen tells whether some job later in the walk might use the free
// GPUs held back: so the walk may not stop early (OmitWaits).
func (p *pass) rsvMayOpen() bool {
	return p.rsvFree > 0 && (p.rsvPreempt || p.rsvAnyLimit)
}

// hasLimit tells whether j declared a usable time limit.
func hasLimit(j *Job) bool {
	return j.TimeLimitS > 0 && !math.IsInf(j.TimeLimitS, 1)
}

// endAt estimates when job j, running (or started in this pass), ends:
// its time limit less what it has run when it declared one (it is
// stopped then); else the median of the GPU-time the distribution of
// job GPU-time leaves a job that has attained its service, over its
// GPUs; past every sample of the distribution, as long again as it has
// run (the median of a Pareto tail of index 1). It is never less than
// minEndS from now: a job past its limit or its estimate still holds its
// GPUs, and is about to leave them.
func (p *pass) endAt(j *Job) float64 {
	t := p.now + max(p.remainingS(j), minEndS)
	if !(t > p.now) {
		// A clock so large that a second does not move it
		// (FuzzSchedule: 1e300): still later than now, or a reservation
		// would take the GPUs as free now.
		t = math.Nextafter(p.now, math.Inf(1))
	}
	return t
}

// minEndS is the least time endAt gives a job that holds its GPUs.
const minEndS = 1.0

// remainingS is endAt's estimate of the time job j runs on.
func (p *pass) remainingS(j *Job) float64 {
	ran := j.ExecutedS
	if !(ran > 0) || math.IsInf(ran, 1) {
		ran = 0
	}
	if hasLimit(j) {
		return j.TimeLimitS - ran
	}
	d := p.dist
	if d == nil {
		d = PriorGPUTimeDist()
	}
	a := j.AttainedService
	if !(a > 0) || math.IsInf(a, 1) {
		a = 0
	}
	if m, ok := d.MedianRemaining(a); ok {
		return m / float64(max(clampGPUs(j.GPUs), 1))
	}
	return ran
}

// MedianRemaining is the median of S - a over the jobs whose GPU-time S
// exceeds a: how much more GPU-time half the jobs that have attained a
// GPU-seconds still need. ok is false when no sample exceeds a.
func (d *GPUTimeDist) MedianRemaining(a float64) (float64, bool) {
	if d == nil || math.IsNaN(a) {
		return 0, false
	}
	i := upperBound(d.sorted, a)
	n := len(d.sorted)
	if i == n {
		return 0, false
	}
	half := d.sufW[i] / 2
	// The first sample k >= i at which the weight of sorted[i:k+1]
	// reaches half: sufW[i] - sufW[k+1] >= half.
	lo, hi := i, n-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d.sufW[i]-d.sufW[m+1] >= half {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return d.sorted[lo] - a, true
}

// mayBackfill tells whether job i (an index in Snapshot.Jobs), later in
// the walk than reservation k, may start on its GPUs: it ends before the
// reservation's start by its time limit, or it is preemptible there. An
// interactive session, on which a person waits, and, under fair share, a
// job within its team's guarantee are held back only until they have
// waited their own bound: the reserved job then waits for them as for
// jobs that started before, and a team's guaranteed work waits at most
// its bound for another team's reservation. Under fair share a borrower
// that has waited its bound is due itself, and no backfill
// (rsvFairVictim): it is held back.
func (p *pass) mayBackfill(i int32, k *rsvState) bool {
	j := &p.s.Jobs[i]
	if hasLimit(j) {
		ran := j.ExecutedS
		if !(ran > 0) || math.IsInf(ran, 1) {
			ran = 0
		}
		if p.now+max(j.TimeLimitS-ran, 0) <= p.endBy(k) {
			return true
		}
	}
	if rsvProtected(j) {
		// A session is never preempted: the reserved job would wait for
		// it to its end. One with a time limit (its team's session
		// policy) that does not end it before the reservation's start
		// waits for the reserved job to start: the guarantee holds for
		// it as for a job that ran its limit. Without a limit it could
		// be held back for ever: it starts once it has waited its bound.
		return !hasLimit(j) && p.waitedBound(j)
	}
	if p.fair && p.waitedBound(j) {
		return p.guaranteed(i) && p.runsBefore(k.deadline)
	}
	return p.rsvPreempt && p.runsBefore(k.deadline)
}

// minBackfillS is the least time a batch job that starts on reserved
// GPUs, as a preemptible backfill or ranked above the holder, can run
// before the reservation's deadline takes them (runsBefore): about what
// a start costs (a container, a restore from a checkpoint). A minute
// cost the 1-GPU jobs of mixed-spec 5% of their JCT in the simulator,
// where a start costs nothing; 30 s, with a 30 s restore and a 10 s
// handover, nothing.
const minBackfillS = 30

// runsBefore tells whether a batch job that starts now on GPUs that a
// reservation of this deadline takes (overdue) runs at least
// minBackfillS first, or the deadline is past: a run cut within seconds
// costs its job a start and a checkpoint for nothing (issue 30: live,
// backfills started 14 ms before the deadline and were preempted at
// it). Past the deadline the reserved job waits only for jobs it may not
// preempt, whose ends are not known: its free GPUs are backfilled.
func (p *pass) runsBefore(deadline float64) bool {
	take := deadline - p.sc.cfg.HandoverS
	return !(p.now < take && take-p.now < minBackfillS)
}

// guaranteed tells whether job i, under fair share, was within its
// team's guarantee when the walk decided it.
func (p *pass) guaranteed(i int32) bool {
	return len(p.rsvWithin) > 0 && p.rsvWithin[i]
}

// waitedBound tells whether job j has waited its own bound: it is then
// held back by no reservation that it may not preempt-backfill.
func (p *pass) waitedBound(j *Job) bool {
	b := p.boundOf(j)
	return b > 0 && waitedS(j, p.now) >= b
}

// interactive: job j is an interactive session (its class is not
// preemptible, or it asked for interactive priority).
func interactive(j *Job) bool {
	return !j.Class.preemptible() || j.Interactive
}

// rsvProtected: job j is an interactive session, or already leaving its
// GPUs (Leaving): it is never preempted for a reservation, nor held back
// by one.
func rsvProtected(j *Job) bool {
	return interactive(j) || j.State == Leaving
}

// rsvBars tells whether slot s is reserved for a job that job i may not
// backfill: the joining of a shared GPU (share.go) asks.
//
// A job that joins a shared GPU may not join it as a preemptible
// backfill: the reserved job preempts no job on a GPU that others share
// (no run holds it alone), so sharing jobs joining one by one would hold
// the reserved GPU for ever. It joins only as a job that ends in time by
// its limit, or one the reserved job waits for anyway.
//
// Nor does a job ranked above the holder of a kept reservation join one
// of its GPUs where rsvEarlyHold would hold a free one off it: in the
// last minBackfillS before the deadline, and past it once the holder can
// take its GPUs. Live, sharing jobs joined a shared GPU of an 8-GPU job's
// reservation in the pass before its deadline and were preempted 9.8 s
// later (issue 30).
func (p *pass) rsvBars(s, i int32) bool {
	if p.count {
		return false
	}
	for k := range p.rsvEarlyList {
		h := &p.rsvEarlyList[k]
		if h.job != i && p.rsvIsDue[h.job] && slices.Contains(h.slots, s) && !p.rsvEarlyMay(i, h) {
			return true
		}
	}
	if len(p.rsv) == 0 {
		return false
	}
	k := p.rsvOwner[s]
	if k < 0 {
		return false
	}
	rk := &p.rsv[k]
	if !p.mayBackfill(i, rk) {
		return true
	}
	j := &p.s.Jobs[i]
	if hasLimit(j) {
		ran := j.ExecutedS
		if !(ran > 0) || math.IsInf(ran, 1) {
			ran = 0
		}
		if p.now+max(j.TimeLimitS-ran, 0) <= p.endBy(rk) {
			return false
		}
	}
	if rsvProtected(j) || p.fair && p.waitedBound(j) {
		return false // waited for, as any job that started before
	}
	return true
}

// openReserved lets pending entry e, decided next, use the free GPUs held
// back for the reservations it may backfill, when it does not fit on the
// GPUs outside them.
func (p *pass) openReserved(e *entry) {
	if p.rsvFree == 0 {
		return
	}
	may := false
	for k := range p.rsv {
		if p.mayBackfill(e.job, &p.rsv[k]) {
			may = true
			break
		}
	}
	if !may || e.gpus <= 0 {
		return
	}
	if int(e.gpus) <= p.cl.free && p.cl.fits(p.ruleFor(e)) {
		return // it fits outside the reservations
	}
	cl := &p.cl
	for k := range p.rsv {
		rk := &p.rsv[k]
		if !p.mayBackfill(e.job, rk) {
			continue
		}
		if p.count {
			cl.free += rk.heldN
			p.rsvFree -= rk.heldN
			p.rsvOpenN += rk.heldN
			rk.heldN = 0
			continue
		}
		for _, s := range rk.held {
			if !p.rsvHeld[s] {
				continue
			}
			p.rsvHeld[s] = false
			p.rsvFree--
			cl.busy[s] = false
			if n := cl.slotNode[s]; cl.nodes[n].sched {
				cl.setFree(int(n), cl.nodes[n].free+1)
			}
			p.rsvOpened = append(p.rsvOpened, s)
		}
		rk.held = rk.held[:0]
		cl.frDirty = true
	}
}

// closeReserved holds back again the reserved GPUs openReserved opened
// that the job did not take. The masked machines must be shown again
// first (unmask).
func (p *pass) closeReserved() {
	cl := &p.cl
	if p.count {
		if p.rsvOpenN == 0 {
			return
		}
		back := min(p.rsvOpenN, max(cl.free, 0))
		cl.free -= back
		p.rsvFree += back
		// The first reservation holds them: which one does not matter
		// in count mode, only how many are held.
		p.rsv[0].heldN += back
		p.rsvOpenN = 0
		return
	}
	if len(p.rsvOpened) == 0 {
		return
	}
	for _, s := range p.rsvOpened {
		if cl.busy[s] {
			continue // the job took it
		}
		p.holdBack(s)
	}
	p.rsvOpened = p.rsvOpened[:0]
}

// holdBack holds free slot s back for its reservation.
func (p *pass) holdBack(s int32) {
	cl := &p.cl
	cl.busy[s] = true
	p.rsvHeld[s] = true
	p.rsvFree++
	if n := cl.slotNode[s]; cl.nodes[n].sched {
		cl.setFree(int(n), cl.nodes[n].free-1)
	}
	cl.frDirty = true
	k := &p.rsv[p.rsvOwner[s]]
	k.held = append(k.held, s)
}

// heldBack tells whether slot s is free but held back for a reservation.
func (p *pass) heldBack(s int32) bool { return len(p.rsv) > 0 && p.rsvHeld[s] }

// unhold gives back held slot s to a running job whose preemption is
// taken back (restore); the slot stays busy.
func (p *pass) unhold(s int32) {
	p.rsvHeld[s] = false
	p.rsvFree--
}

// rsvUnholdN gives back n GPUs held for reservations (count mode) to a
// running job whose preemption is taken back.
func (p *pass) rsvUnholdN(n int) {
	for k := range p.rsv {
		take := min(n, p.rsv[k].heldN)
		p.rsv[k].heldN -= take
		p.rsvFree -= take
		n -= take
	}
}

// tryReserve gives pending entry e, which cannot start, a reservation if
// it is due for one. A job of one GPU never is: the first GPU it can use
// that frees goes to it before every job ranked below it, so holding
// GPUs back gains it nothing, and, kept until it started, its reservation
// took the place of a job that must gather several: on a busy machine
// the 1-GPU jobs submitted before an 8-GPU job held the one reservation
// in turn, up to 415 s past the 8-GPU job's due time (issue 30). It reports whether e started instead: its reserved
// GPUs were free or held by jobs it may preempt.
func (p *pass) tryReserve(e *entry) bool {
	if !p.rsvOn {
		return false
	}
	if !p.rsvRoom(e.job) {
		p.rsvBehind = e.job // appendReserved says why, if it is due
		return false
	}
	if e.gpus < 2 || int(e.gpus) > p.cl.capacity-p.maskedCap {
		return false
	}
	j := &p.s.Jobs[e.job]
	if b := p.boundOf(j); !(b > 0) || waitedS(j, p.now) < p.dueWait(b) {
		return false
	}
	due := p.dueOf(e.job)
	if p.preempt && !p.merged && (p.rsvPreempt || !p.count) {
		p.merge(e)
	}
	kept := p.rsvKeptOf(e.job)
	if p.count {
		return p.reserveCount(e, due, kept)
	}
	return p.reserveNodes(e, p.ruleFor(e), due, kept)
}

// runEndAt is endAt of running job ri, computed once a pass.
func (p *pass) runEndAt(ri int32) float64 {
	if len(p.runEnd) != len(p.runs) {
		p.runEnd = resize(p.runEnd, len(p.runs))
		for i := range p.runEnd {
			p.runEnd[i] = math.NaN()
		}
	}
	t := p.runEnd[ri]
	if t != t {
		t = p.endAt(&p.s.Jobs[p.runs[ri].job])
		p.runEnd[ri] = t
	}
	return t
}

// rsvReleaseAt is when running job ri's GPUs are expected to free for
// reservation holder e, due since due, when it may not preempt ri now:
// ri's expected end or, under a preemptive policy, e's deadline if that
// comes first and ri is a job an overdue reservation takes its GPUs
// from (overdueVictim). The reservation's start is then the promise the
// deadline keeps, not an end the deadline cuts short: live, a job
// reserved with a 1-minute bound read "reserved for you from" 17 minutes
// ahead, the batch jobs' expected ends, and took its GPUs at the
// deadline (issue 30). Jobs started in this pass keep their ends.
func (p *pass) rsvReleaseAt(ri int32, e *entry, due float64) float64 {
	t := p.runEndAt(ri)
	if !p.rsvPreempt {
		return t
	}
	d := p.deadlineOf(e.job, due)
	if t <= d {
		return t
	}
	run := &p.runs[ri]
	if st := run.state &^ runReached; st != runOpen && st != runKept {
		return t
	}
	if !p.overdueVictim(run, e.job) {
		return t
	}
	return max(d, p.now)
}

// rsvVictim tells whether running job ri may be preempted for
// reservation holder e, due since due: under a preemptive policy without
// fair share, a job the policy ranks below e (the walk has not kept it),
// or one that started since e became due and, as the waiting job it was
// then, ranks below e: the backfills the reservation let start; never
// an interactive session, nor a job sharing its GPU with a job started
// in this pass.
func (p *pass) rsvVictim(ri int32, e *entry, due float64) bool {
	run := &p.runs[ri]
	if !p.rsvPreempt || run.n <= 0 || run.flags&runPinned != 0 {
		return false
	}
	j := &p.s.Jobs[run.job]
	// Under fair share a job due first is not taken by rank either.
	// Without it the policy's rank decides, as for any preemption:
	// sparing them there, on openb-last6w at 2x8 GPUs (far past its
	// load), long jobs that had started due held their GPUs against
	// short ones, and the average JCT rose from 25,490 to 119,895 s
	// under tiresias-g.
	if rsvProtected(j) || p.fair && p.dueFirst(j, e.job) {
		return false
	}
	if p.rsvVictimByRank(ri, e, due) {
		return true
	}
	// Past its deadline, more.
	st := run.state &^ runReached
	return (st == runOpen || st == runKept) && p.overdue(e.job, due) && p.overdueVictim(run, e.job)
}

// rsvVictimByRank is rsvVictim before the reserved job's deadline: the
// jobs the policy ranks below it, and the backfills.
func (p *pass) rsvVictimByRank(ri int32, e *entry, due float64) bool {
	if p.fair {
		return p.rsvFairVictim(ri, e, due)
	}
	run := &p.runs[ri]
	switch run.state &^ runReached {
	case runOpen:
		return true
	case runKept:
		if !(p.s.Jobs[run.job].LastStartTime >= due) {
			return false
		}
		return compareEntries(p.startKey(ri), e) > 0
	}
	return false
}

// rsvFairVictim is rsvVictim under fair share, where the policy preempts
// only within a team and a team under its guarantee reclaims what other
// teams borrow: the reserved job e preempts its own team's jobs that the
// policy ranks below it, as the policy would, and of other teams only the
// backfills, the jobs
// that started since it became due (due) and that, as the waiting jobs
// they were then, the policy ranked below it; and of those not a job
// that had waited its own bound when it started: one within its team's
// guarantee, so that a team's guaranteed work is delayed by another
// team's reservation by its bound at most, nor a borrower, due itself
// (held off the reserved GPUs, mayBackfill), which started in its turn
// elsewhere: preempting it would only hand its GPUs from one due job to
// another, pass after pass, at a long queue of due jobs.
func (p *pass) rsvFairVictim(ri int32, e *entry, due float64) bool {
	run := &p.runs[ri]
	st := run.state &^ runReached
	if st != runOpen && st != runKept {
		return false
	}
	if st == runOpen && p.jteam[run.job] == p.jteam[e.job] {
		// Its own team's job, if the policy ranks it below e: the
		// policy preempts within a team, reservation or not. Else a
		// long job of its own team that started before it was due (the
		// demo's half-hour notebook, in queue 1) held its GPUs to its
		// end (issue 30). Open is not enough: the walk defers a running
		// borrower, so one the policy ranks above e may still be open
		// when e is decided at its rank (an 8-GPU job that had started
		// was preempted for the next one, which then was for the next);
		// one ranked above it is preempted only as a backfill, below.
		if compareKeys(&p.rents[run.ent], e) > 0 {
			return true
		}
	}
	j := &p.s.Jobs[run.job]
	if !(j.LastStartTime >= due) {
		return false
	}
	if p.waitedBound(j) {
		return false
	}
	return compareKeys(p.startKey(ri), e) > 0
}

// startKey is running job run's entry as the waiting job it was when its
// run started, computed once a pass: its rank since may have risen with
// its service (tiresias-g, srsf).
func (p *pass) startKey(ri int32) *entry {
	run := &p.runs[ri]
	if len(p.runStart) != len(p.runs) {
		p.runStart = resize(p.runStart, len(p.runs))
		for i := range p.runStart {
			p.runStart[i].job = -1
		}
	}
	w := &p.runStart[ri]
	if w.job >= 0 {
		return w
	}
	j := &p.s.Jobs[run.job]
	at := *j
	if ran := min(p.now-j.LastStartTime, j.ExecutedS); ran > 0 {
		at.ExecutedS -= ran
		at.AttainedService -= ran * float64(max(clampGPUs(j.GPUs), 0))
	}
	qs := &p.noQueue
	if p.pol.queues != nil {
		qs = &p.qs[run.job]
	}
	p.pol.key(p, w, &at, qs, 1)
	w.k0, w.k1, w.k2, w.k3 = noNaN(w.k0), noNaN(w.k1), noNaN(w.k2), noNaN(w.k3)
	w.id, w.queue, w.job, w.run = j.ID, int32(qs.Index), run.job, -1
	return w
}

// reserveNodes reserves, for e under rule r, the slots that can be freed
// earliest, or starts e on them when they can be freed now.
func (p *pass) reserveNodes(e *entry, r rule, due float64, kept *Reservation) bool {
	cl := &p.cl
	ns := len(cl.busy)
	p.freeAt = resize(p.freeAt, ns)
	p.slotRun = resize(p.slotRun, ns)
	inf := math.Inf(1)
	ks := p.keptSlots()
	for s := range ns {
		p.slotRun[s] = -1
		switch {
		case p.rsvOwner[s] >= 0:
			p.freeAt[s] = inf // another reservation's
		case len(ks) > 0 && ks[s] >= 0 && ks[s] != e.job && p.rsvIsDue[ks[s]]:
			p.freeAt[s] = inf // kept for a job the walk has not reached
		case cl.busy[s]:
			p.freeAt[s] = -1 // held by whom: below
		default:
			p.freeAt[s] = p.now
		}
	}
	for ri := range p.runs {
		run := &p.runs[ri]
		if run.state&^runReached == runPreempted {
			continue
		}
		if p.rsvVictim(int32(ri), e, due) {
			for _, s := range p.held[run.lo:run.hi] {
				if p.freeAt[s] < 0 {
					p.freeAt[s], p.slotRun[s] = p.now, int32(ri)
				}
			}
			continue
		}
		t := p.rsvReleaseAt(int32(ri), e, due)
		for _, s := range p.held[run.lo:run.hi] {
			if p.freeAt[s] != inf {
				p.freeAt[s] = max(p.freeAt[s], t)
			}
		}
	}
	p.rsvShareFree = p.rsvShareFree[:0]
	if len(p.shared) > 0 {
		p.sharedFreeAt()
		p.sharedVictims(e, due)
	}
	for k := range p.d.Starts {
		t := p.endAt(&p.s.Jobs[p.startJob[k]])
		for _, g := range p.d.Starts[k].GPUs {
			if s := cl.slot(g); s >= 0 && p.freeAt[s] != inf {
				if p.slotRun[s] >= 0 { // a victim's GPU a sharing job joined
					p.slotRun[s] = -1
				}
				if len(p.rsvShareFree) > 0 {
					p.rsvShareFree[s] = false
				}
				p.freeAt[s] = max(p.freeAt[s], t)
			}
		}
	}
	// Candidates: the slots of schedulable machines (not masked for e)
	// whose end is known.
	cand := p.rsvCand[:0]
	for i := range cl.nodes {
		n := &cl.nodes[i]
		if !n.sched {
			continue
		}
		for s := n.first; s < n.first+n.n; s++ {
			if f := p.freeAt[s]; f >= 0 && f != inf {
				cand = append(cand, s)
			} else if f < 0 {
				p.freeAt[s] = inf // busy, claimed by no job it can see
			}
		}
	}
	p.rsvCand = cand
	if len(cand) < r.n {
		return false
	}
	now := p.rsvFeasible(cand, r, p.now)
	if now && !p.rsvNoStart {
		p.startReserved(e, p.rsvChoose(cand, r, p.now))
		return true
	}
	if kept != nil {
		if slots, from, ok := p.rsvKeptSlots(kept, r); ok {
			p.addReservation(e, slots, r.n, p.keptFrom(from, kept), due)
			return false
		}
	}
	if now {
		slots := p.rsvChoose(cand, r, p.now)
		if p.rsvNoStart {
			p.addReservation(e, slots, r.n, p.now, due)
			return false
		}
		p.startReserved(e, slots)
		return true
	}
	// The earliest time T at which the slots free by then hold r.
	times := p.rsvTimes[:0]
	for _, s := range cand {
		times = append(times, p.freeAt[s])
	}
	slices.Sort(times)
	times = slices.Compact(times)
	p.rsvTimes = times
	lo, hi := 0, len(times)-1
	if !p.rsvFeasible(cand, r, times[hi]) {
		return false
	}
	for lo < hi {
		m := (lo + hi) / 2
		if p.rsvFeasible(cand, r, times[m]) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	from := times[lo]
	slots := p.rsvChoose(cand, r, from)
	if from <= p.now && !p.rsvNoStart {
		p.startReserved(e, slots)
		return true
	}
	p.addReservation(e, slots, r.n, max(from, p.now), due)
	return false
}

// rsvKeptSlots returns the slots of kept reservation k when they still
// suit rule r: each names a GPU of a schedulable machine that the job may
// use, is reserved for no job before it in this pass and is expected to
// free (freeAt), as many as r asks, on no more machines than r allows;
// and the time the last of them frees. A kept reservation keeps its GPUs
// while they do: recomputed from scratch at each pass, the GPUs that
// free earliest moved from machine to machine with every estimate.
func (p *pass) rsvKeptSlots(k *Reservation, r rule) ([]int32, float64, bool) {
	if len(k.GPUs) != r.n {
		return nil, 0, false
	}
	cl := &p.cl
	slots := make([]int32, 0, r.n)
	from := p.now
	for _, g := range k.GPUs {
		s := cl.slot(g)
		if s < 0 || !cl.nodes[cl.slotNode[s]].sched {
			return nil, 0, false
		}
		f := p.freeAt[s]
		if f < 0 || math.IsInf(f, 1) {
			return nil, 0, false
		}
		slots = append(slots, int32(s))
		from = max(from, f)
	}
	slices.Sort(slots)
	nodes := 0
	for i, s := range slots {
		if i > 0 && s == slots[i-1] {
			return nil, 0, false
		}
		if i == 0 || cl.slotNode[s] != cl.slotNode[slots[i-1]] {
			nodes++
		}
	}
	if r.maxNodes > 0 && nodes > r.maxNodes {
		return nil, 0, false
	}
	return slots, from, true
}

// keptSlots maps each slot to the holder, not yet decided or not, whose
// kept reservation names it (-1: none), built once a pass when a job
// reserves: no job ranked above a holder reserves its GPUs.
func (p *pass) keptSlots() []int32 {
	if len(p.rsvHolders) == 0 {
		return nil
	}
	if len(p.rsvKeptSlot) == len(p.cl.busy) {
		return p.rsvKeptSlot
	}
	ks := resize(p.rsvKeptSlot, len(p.cl.busy))
	for s := range ks {
		ks[s] = -1
	}
	for _, i := range p.rsvHolders {
		for _, g := range p.s.Reservations[p.rsvHolder[i]-1].GPUs {
			if s := p.cl.slot(g); s >= 0 && ks[s] < 0 {
				ks[s] = i
			}
		}
	}
	p.rsvKeptSlot = ks
	return ks
}

// keptAhead is how many GPUs the holders of kept reservations that the
// walk has not reached yet ask (count mode): they keep them.
func (p *pass) keptAhead(e *entry) int {
	n := 0
	for _, i := range p.rsvHolders {
		if i != e.job && p.rsvIsDue[i] {
			n += int(clampGPUs(p.s.Jobs[i].GPUs))
		}
	}
	return n
}

// keptFrom is when a kept reservation's GPUs are expected to free, from
// is this pass's estimate: never later than the last pass said (the jobs
// on them only leave, and a job that runs past its estimate is about to:
// "expected free now" then), nor before now.
func (p *pass) keptFrom(from float64, k *Reservation) float64 {
	if k.FromS < from {
		from = k.FromS
	}
	return max(from, p.now)
}

// sharedFreeAt gives the GPUs that several running jobs hold (a shared
// GPU's lanes, share.go), which no run holds alone (dropShared), the time
// the last of them is expected to end: such a GPU frees then, not never.
// Without it a machine with one shared GPU could never be reserved whole,
// and an 8-GPU job on a machine of 8 never got a reservation while a
// sharing job ran anywhere on it.
func (p *pass) sharedFreeAt() {
	cl := &p.cl
	mark := resize(p.rsvShared, len(cl.busy))
	clear(mark)
	p.rsvShared = mark
	for _, s := range p.shared {
		if p.freeAt[s] < 0 {
			mark[s] = true
			p.freeAt[s] = -1 // busy: its holders' ends below
		}
	}
	for i := range p.s.Jobs {
		if p.outcome[i] != outRunning {
			continue
		}
		j := &p.s.Jobs[i]
		t := math.NaN()
		for _, g := range j.Placement {
			s := cl.slot(g)
			if s < 0 || !mark[s] {
				continue
			}
			if t != t {
				t = p.endAt(j)
			}
			p.freeAt[s] = max(p.freeAt[s], t)
		}
	}
}

// sharedVictims frees, for reservation holder e past its deadline, the
// GPUs that several running jobs share (a shared GPU's lanes, which no
// run holds alone: dropShared) when every one of them is a job the
// reservation may take (overdueTakes): startReserved then preempts them
// all (rsvShareFree). A shared GPU frees only when its last job leaves;
// before (issue 30), it was never taken, and on the demo the reserved
// machine waited past the deadline for its sharing jobs to end by
// themselves.
//
// Before the deadline, such a GPU is expected free at the deadline when
// that comes before its jobs' ends, as rsvReleaseAt has it for a GPU
// one run holds, and nothing is taken yet.
func (p *pass) sharedVictims(e *entry, due float64) {
	if !p.rsvPreempt {
		return
	}
	overdue := p.overdue(e.job, due)
	cl := &p.cl
	take := resize(p.rsvShareFree, len(cl.busy))
	clear(take)
	p.rsvShareFree = take
	for _, s := range p.shared {
		if p.rsvShared[s] && p.freeAt[s] != math.Inf(1) {
			take[s] = true
		}
	}
	for ri := range p.runs {
		run := &p.runs[ri]
		if run.state&^runReached == runPreempted {
			continue
		}
		for _, g := range p.s.Jobs[run.job].Placement {
			if s := cl.slot(g); s >= 0 && take[s] && !p.sharedVictim(run, e.job) {
				take[s] = false
			}
		}
	}
	if !overdue {
		at := max(p.deadlineOf(e.job, due), p.now)
		for _, s := range p.shared {
			if take[s] {
				p.freeAt[s] = min(p.freeAt[s], at)
			}
		}
		clear(take) // taken at the deadline, not in this pass
		return
	}
	for _, s := range p.shared {
		if take[s] {
			p.freeAt[s] = p.now
		}
	}
}

// sharedVictim tells whether running job run, which shares its GPU with
// other running jobs, may be preempted for job i past its deadline:
// overdueVictim's rule, for a job whose GPU no run holds alone. Never a
// session, nor a job that a job started in this pass joined.
func (p *pass) sharedVictim(run *runJob, i int32) bool {
	if st := run.state &^ runReached; st != runOpen && st != runKept || run.flags&runPinned != 0 {
		return false
	}
	return p.overdueTakes(run, i)
}

// rsvCommit holds back the free GPUs of the reservation just made, once
// its job's wait is explained (with the GPUs free it saw), and keeps the
// running jobs on its GPUs: no job ranked below its job preempts them.
func (p *pass) rsvCommit() {
	if p.rsvPending < 0 {
		return
	}
	k := p.rsvPending
	p.rsvPending = -1
	rk := &p.rsv[k]
	if p.count {
		if rk.heldN > 0 {
			p.cl.free -= rk.heldN
			p.rsvFree += rk.heldN
		}
		return
	}
	for _, s := range rk.slots {
		if !p.cl.busy[s] {
			p.holdBack(s)
		}
	}
	if !p.merged {
		return
	}
	for ri := range p.runs {
		run := &p.runs[ri]
		if run.state&^runReached != runOpen {
			continue
		}
		for _, s := range p.held[run.lo:run.hi] {
			if p.rsvOwner[s] == k {
				p.keep(run)
				break
			}
		}
	}
}

// rsvFeasible tells whether rule r fits on the candidate slots free by t.
func (p *pass) rsvFeasible(cand []int32, r rule, t float64) bool {
	cl := &p.cl
	counts := resize(p.rsvCount, len(cl.nodes))
	clear(counts)
	p.rsvCount = counts
	total := 0
	for _, s := range cand {
		if p.freeAt[s] <= t {
			counts[cl.slotNode[s]]++
			total++
		}
	}
	if total < r.n {
		return false
	}
	if r.maxNodes == 0 {
		return true
	}
	top := p.rsvTop(counts, r.maxNodes)
	sum := 0
	for _, i := range top {
		sum += int(counts[i])
	}
	return sum >= r.n
}

// rsvTop returns the k nodes with the most counted slots, most first,
// then in node order.
func (p *pass) rsvTop(counts []int32, k int) []int32 {
	idx := p.rsvNodes[:0]
	for i, c := range counts {
		if c > 0 {
			idx = append(idx, int32(i))
		}
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return int(counts[b] - counts[a]) })
	p.rsvNodes = idx
	return idx[:min(k, len(idx))]
}

// rsvChoose picks r.n of the candidate slots free by t: on the fewest
// nodes a consolidated job needs, the slots that free latest by t first,
// so that GPUs free now stay for other jobs; when t is now, the free
// slots before those it must preempt.
func (p *pass) rsvChoose(cand []int32, r rule, t float64) []int32 {
	cl := &p.cl
	now := t <= p.now
	better := func(a, b int32) int {
		if now {
			va, vb := p.slotRun[a] >= 0, p.slotRun[b] >= 0
			if va != vb {
				return order(!va)
			}
		} else if fa, fb := p.freeAt[a], p.freeAt[b]; fa != fb {
			return order(fa > fb)
		}
		return order(a < b)
	}
	pool := p.rsvPool[:0]
	if now {
		// Free slots, then those to preempt, each in slot order: cand
		// is in slot order.
		for _, s := range cand {
			if p.freeAt[s] <= t && p.slotRun[s] < 0 {
				pool = append(pool, s)
			}
		}
		for _, s := range cand {
			if p.freeAt[s] <= t && p.slotRun[s] >= 0 {
				pool = append(pool, s)
			}
		}
	} else {
		for _, s := range cand {
			if p.freeAt[s] <= t {
				pool = append(pool, s)
			}
		}
	}
	if r.maxNodes > 0 {
		p.rsvFeasible(cand, r, t)
		counts := p.rsvCount
		var nodes []int32
		if r.maxNodes == 1 {
			// The one node whose best slots are best: fewest free slots
			// taken (or fewest preemptions now), then node order.
			best, bestBad := int32(-1), 0
			for i, c := range counts {
				if int(c) < r.n {
					continue
				}
				bad := p.rsvBad(pool, int32(i), r.n, better, now)
				if best < 0 || bad < bestBad {
					best, bestBad = int32(i), bad
				}
			}
			nodes = append(p.rsvNodes[:0], best)
		} else {
			nodes = slices.Clone(p.rsvTop(counts, r.maxNodes))
			sum, k := 0, 0
			for k < len(nodes) && sum < r.n {
				sum += int(counts[nodes[k]])
				k++
			}
			nodes = nodes[:k]
		}
		pool = slices.DeleteFunc(pool, func(s int32) bool { return !slices.Contains(nodes, cl.slotNode[s]) })
	}
	if !now {
		slices.SortFunc(pool, better)
	}
	p.rsvPool = pool
	out := slices.Clone(pool[:r.n])
	slices.Sort(out)
	return out
}

// rsvBad counts, among the n best slots of node i in pool, the free ones
// (or, when now, the ones to preempt).
func (p *pass) rsvBad(pool []int32, i int32, n int, better func(a, b int32) int, now bool) int {
	mine := p.rsvScratch[:0]
	for _, s := range pool {
		if p.cl.slotNode[s] == i {
			mine = append(mine, s)
		}
	}
	slices.SortFunc(mine, better)
	p.rsvScratch = mine
	bad := 0
	for _, s := range mine[:n] {
		if now && p.slotRun[s] >= 0 || !now && !p.cl.busy[s] {
			bad++
		}
	}
	return bad
}

// startReserved preempts the jobs on slots that e may preempt and starts
// e there.
func (p *pass) startReserved(e *entry, slots []int32) {
	cl := &p.cl
	for _, s := range slots {
		if ri := p.slotRun[s]; ri >= 0 && p.runs[ri].state&^runReached != runPreempted {
			p.rsvPreemptRun(ri, e)
		}
		if len(p.rsvShareFree) > 0 && p.rsvShareFree[s] {
			p.preemptSharers(s, e)
		}
	}
	for _, s := range slots {
		cl.busy[s] = true
		n := cl.slotNode[s]
		cl.setFree(int(n), cl.nodes[n].free-1)
	}
	cl.frDirty = true
	if p.sh.on {
		p.shareStarted(e.job, slots)
	}
	gpus := make([]gpu.Ref, len(slots))
	for i, s := range slots {
		gpus[i] = cl.ref(s)
	}
	p.begin(e, gpus)
}

// preemptSharers preempts the running jobs that share slot s for
// reservation holder by, past its deadline (sharedVictims), and frees
// the slot: no run held it alone.
func (p *pass) preemptSharers(s int32, by *entry) {
	cl := &p.cl
	for ri := range p.runs {
		run := &p.runs[ri]
		if run.state&^runReached == runPreempted {
			continue
		}
		if !slices.ContainsFunc(p.s.Jobs[run.job].Placement, func(g gpu.Ref) bool { return cl.slot(g) == int(s) }) {
			continue
		}
		p.rsvPreemptRun(int32(ri), by)
		pr := &p.d.Preempts[run.preempt]
		pr.Reason += "; it shared its GPU with other jobs, all preempted with it: a shared GPU frees only when every job on it leaves"
	}
	if cl.busy[s] {
		cl.busy[s] = false
		n := cl.slotNode[s]
		cl.setFree(int(n), cl.nodes[n].free+1)
		cl.frDirty = true
	}
	p.rsvShareFree[s] = false
}

// rsvPreemptRun preempts running job ri for reservation holder by: its
// GPUs are free afterwards.
func (p *pass) rsvPreemptRun(ri int32, by *entry) {
	run := &p.runs[ri]
	if run.state&^runReached == runKept {
		// Undo keep's count: preemptRun counts it again.
		p.cl.reclTotal += int(run.n)
		if !p.count {
			for _, s := range p.held[run.lo:run.hi] {
				p.cl.recl[p.cl.slotNode[s]]++
			}
		}
	}
	p.shift(run, +1)
	run.flags |= runForReservation
	if p.lentTo(run, by.job) {
		run.flags |= runLent
	}
	p.preemptRun(ri, by)
	pr := &p.d.Preempts[run.preempt]
	if !p.sc.cfg.OmitReasons {
		pr.Reason = p.rsvPreemptReason(&p.rents[run.ent], by)
	}
	if p.count || len(p.rsv) == 0 {
		return
	}
	// GPUs it held that another reservation has are held back for it.
	for _, s := range p.held[run.lo:run.hi] {
		if p.rsvOwner[s] >= 0 && !p.cl.busy[s] {
			p.holdBack(s)
		}
	}
}

// deadlineClause says, in a preemption's reason, why the reserved job
// has reached its deadline: it has waited its bound again since it was
// due, or, with a lead (Config.ReserveLeadS), its bound.
func (p *pass) deadlineClause() string {
	if p.sc.cfg.ReserveLeadS != 0 {
		return ", which had its GPUs reserved before its bound so that they drain toward it, and has now waited its bound"
	}
	return ", which had its GPUs reserved once it waited past its bound and has now waited its bound again"
}

// rsvPreemptReason says why victim gives way to the reserved job by.
func (p *pass) rsvPreemptReason(victim, by *entry) string {
	b := append(p.buf[:0], "preempted for job "...)
	b = strconv.AppendInt(b, by.id, 10)
	if victim.run >= 0 && p.runs[victim.run].flags&runLent != 0 {
		lender := p.s.Jobs[victim.job].Team
		b = append(b, p.deadlineClause()...)
		b = append(b, ": this job started on them after they were reserved, and a reservation past its deadline takes them back, once, even from a team's guaranteed work; it goes first in its queue, and team "...)
		b = appendName(b, lender)
		b = append(b, " may reclaim the GPUs job "...)
		b = strconv.AppendInt(b, by.id, 10)
		b = append(b, " borrows from it once it has run "...)
		b = appendNum(b, p.minRunOf(&p.s.Jobs[by.job]))
		b = append(b, " s"...)
		p.buf = b
		return string(b)
	}
	if p.overdue(by.job, p.dueOf(by.job)) {
		b = append(b, p.deadlineClause()...)
		b = append(b, ": a reservation past its deadline takes its GPUs from any batch job"...)
		p.buf = b
		return string(b)
	}
	b = append(b, ", which had its GPUs reserved once it waited past its bound, and ranks above it as a waiting job ("...)
	b = p.appendRank(b, by)
	b = append(b, "; this job: "...)
	b = p.appendRank(b, victim)
	b = append(b, ')')
	p.buf = b
	return string(b)
}

// reserveCount is reserveNodes in count placement: the GPUs running jobs
// free, in the order they are expected to, go to the reservations in
// priority order; e's starts when the GPUs freed by then, with the free
// ones, cover its GPUs and the earlier reservations'.
func (p *pass) reserveCount(e *entry, due float64, kept *Reservation) bool {
	rels := p.rsvRels[:0]
	victims := 0
	if len(p.runs) > 0 {
		for ri := range p.runs {
			run := &p.runs[ri]
			if run.state&^runReached == runPreempted || run.n <= 0 {
				continue
			}
			if p.rsvVictim(int32(ri), e, due) {
				rels = append(rels, rsvRel{at: p.runEndAt(int32(ri)), n: int(run.n), run: int32(ri)})
				victims += int(run.n)
				continue
			}
			rels = append(rels, rsvRel{at: p.rsvReleaseAt(int32(ri), e, due), n: int(run.n), run: -1})
		}
	} else {
		for _, i := range p.runIdx {
			j := &p.s.Jobs[i]
			rels = append(rels, rsvRel{at: p.endAt(j), n: jobGPUs(j), run: -1})
		}
	}
	for k := range p.d.Starts {
		j := &p.s.Jobs[p.startJob[k]]
		rels = append(rels, rsvRel{at: p.endAt(j), n: jobGPUs(j), run: -1})
	}
	p.rsvRels = rels
	n := int(e.gpus)
	if n <= p.cl.free+victims && !p.rsvNoStart {
		// Preempt the victims that would run longest, until it fits.
		vs := slices.DeleteFunc(slices.Clone(rels), func(x rsvRel) bool { return x.run < 0 })
		slices.SortFunc(vs, func(a, b rsvRel) int {
			if a.at != b.at {
				return order(a.at > b.at)
			}
			return order(p.s.Jobs[p.runs[a.run].job].ID < p.s.Jobs[p.runs[b.run].job].ID)
		})
		// Then spare, from the last taken back, those it can do without.
		k, got := 0, p.cl.free
		for ; k < len(vs) && got < n; k++ {
			got += vs[k].n
		}
		vs = vs[:k]
		for i := len(vs) - 1; i >= 0; i-- {
			if got-vs[i].n >= n {
				got -= vs[i].n
				vs[i].run = -1
			}
		}
		for _, v := range vs {
			if v.run >= 0 {
				p.rsvPreemptRun(v.run, e)
			}
		}
		p.cl.free -= n
		p.begin(e, nil)
		return true
	}
	slices.SortFunc(rels, func(a, b rsvRel) int {
		if a.at != b.at {
			return order(a.at < b.at)
		}
		return a.n - b.n
	})
	need := n + p.keptAhead(e)
	for k := range p.rsv {
		need += p.rsv[k].n
	}
	have := p.cl.free + p.rsvFree
	from := p.now
	for _, x := range rels {
		if have >= need {
			break
		}
		have += x.n
		from = x.at
	}
	if have < need {
		return false
	}
	from = max(from, p.now)
	if kept != nil {
		from = p.keptFrom(from, kept)
	}
	p.addReservation(e, nil, n, from, due)
	// Jobs without a known end may take only the GPUs not needed then.
	extra := have - need
	if held := p.cl.free - extra; held > 0 {
		p.rsv[len(p.rsv)-1].heldN = held // held back by rsvCommit
	}
	return false
}

// rsvRel is a running job's GPUs, freed at an estimated time (count
// mode).
type rsvRel struct {
	at  float64
	n   int
	run int32 // a run the reserved job may preempt, or -1
}

// addReservation records e's reservation.
func (p *pass) addReservation(e *entry, slots []int32, n int, from, due float64) {
	k := int32(len(p.rsv))
	p.rsv = append(p.rsv, rsvState{job: e.job, ent: *e, n: n, from: from, due: due, deadline: p.deadlineOf(e.job, due), starts: len(p.d.Starts)})
	rk := &p.rsv[k]
	rk.slots = slots
	var gpus []gpu.Ref
	if slots != nil {
		gpus = make([]gpu.Ref, len(slots))
		for i, s := range slots {
			gpus[i] = p.cl.ref(s)
			p.rsvOwner[s] = k
		}
	}
	p.d.Reservations = append(p.d.Reservations, Reservation{JobID: e.id, GPUs: gpus, Count: n, FromS: from, DueS: due})
	p.rsvJust, p.rsvPending = e.job, k
	p.rsvSessions(k)
	p.recheckAt(from)
	if p.rsvPreempt {
		p.recheckAt(rk.deadline - p.sc.cfg.HandoverS)
	}
}

// rsvSessions lists, for the reason of the job of reservation k, just
// made, the interactive sessions running on its GPUs (nodes mode): a
// session is never preempted for a reservation, so the job waits for each
// to end, however long it runs (issue 30: on one machine an 8-GPU job's
// reason said only that its GPUs were reserved, while sessions of an hour
// or more held one of them).
func (p *pass) rsvSessions(k int32) {
	p.rsvJustSess = p.rsvJustSess[:0]
	if p.sc.cfg.OmitWaits || p.rsv[k].slots == nil {
		return
	}
	for ri := range p.runs {
		run := &p.runs[ri]
		if run.state&^runReached == runPreempted {
			continue
		}
		if !interactive(&p.s.Jobs[run.job]) {
			continue
		}
		for _, s := range p.held[run.lo:run.hi] {
			if p.rsvOwner[s] == k {
				p.rsvJustSess = append(p.rsvJustSess, p.s.Jobs[run.job].ID)
				break
			}
		}
	}
	slices.Sort(p.rsvJustSess)
}

// appendSessionsHeld says which sessions hold some of a reservation's
// GPUs (rsvSessions): "session 45 holds one of them: a session is never
// preempted, so the job waits for it to end".
func appendSessionsHeld(b []byte, ids []int64) []byte {
	if len(ids) == 1 {
		b = append(b, "; session "...)
		b = strconv.AppendInt(b, ids[0], 10)
		return append(b, " holds one of them: a session is never preempted, so the job waits for it to end"...)
	}
	b = append(b, "; sessions "...)
	for i, id := range ids {
		switch {
		case i == len(ids)-1:
			b = append(b, " and "...)
		case i > 0:
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return append(b, " hold some of them: a session is never preempted, so the job waits for them to end"...)
}

// rsvRecheck asks for a pass when the next waiting job becomes due, while
// the pass could still give it a reservation.
func (p *pass) rsvRecheck() {
	if p.rsvOn && len(p.rsv) < p.rsvMax {
		p.recheckAt(p.rsvNext)
	}
}

// appendReserved appends what a waiting job's reason says of the
// reservations: its own, or the free GPUs held back for others.
func (p *pass) appendReserved(b []byte, e *entry) []byte {
	if p.rsvJust == e.job {
		r := &p.d.Reservations[len(p.d.Reservations)-1]
		b = append(b, "; "...)
		b = append(b, r.Clause(p.now)...)
		if len(p.rsvJustSess) > 0 {
			b = appendSessionsHeld(b, p.rsvJustSess)
		}
		return b
	}
	if j := &p.s.Jobs[e.job]; e.gpus > 1 && (p.rsvFreshDue || p.rsvBehind == e.job) {
		if bound := p.boundOf(j); bound > 0 && waitedS(j, p.now) >= p.dueWait(bound) {
			switch {
			case p.rsvFreshDue && p.rsvLent(j):
				b = append(b, "; it has run once on GPUs another team lent it, so jobs due that have not are reserved first"...)
			case p.rsvBehind == e.job:
				b = append(b, "; due for a reservation: jobs past their deadline by "...)
				b = strconv.AppendInt(b, lateBounds, 10)
				b = append(b, " bounds are reserved first, the earliest first, then jobs that ask more GPUs, or as many with earlier deadlines"...)
			}
		}
	}
	if p.rsvFree > 0 {
		b = append(b, "; "...)
		b = strconv.AppendInt(b, int64(p.rsvFree), 10)
		if p.rsvFree == 1 {
			b = append(b, " free GPU held for job "...)
		} else {
			b = append(b, " free GPUs held for job "...)
		}
		b = strconv.AppendInt(b, p.d.Reservations[0].JobID, 10)
		b = append(b, "'s reservation"...)
	}
	return b
}

// overdue tells whether job i, due for a reservation since due, has
// reached its deadline under a preemptive policy: it has waited its bound
// again since it became due (twice its bound in all), less the handover
// (Config.HandoverS) that the GPUs it takes need to free. Its reservation
// then takes its GPUs from any batch job the policy may preempt, however
// they rank and whenever they started (not sessions; under fair share
// not another team's job that had waited its own bound when it started),
// and no job but it starts on them (rsvEarlyHold): the promise is a wait
// of at most twice the bound, and without it an 8-GPU job on a busy
// machine waited for the 1-GPU jobs submitted before it, which rank
// above it in tiresias-l's queue 0 and started one after another on its
// GPUs after it was due (issue 30).
func (p *pass) overdue(i int32, due float64) bool {
	if !p.rsvPreempt {
		return false
	}
	return p.now >= p.deadlineOf(i, due)-p.sc.cfg.HandoverS
}

// overdueVictim tells whether running job run may be preempted for job
// i, overdue (past its deadline), beside those rsvVictimByRank gives:
// any batch job, whenever it started and however it ranks, but one that
// was due for a reservation itself when it started (wasDue); and of
// another team under fair share a job that borrows (beyond its team's
// guarantee when the pass began) and had not waited its own bound when
// it started, or any that started after i was due, for a job i that has
// never run: a team lends its guarantee to another team's reservation
// once ("Reservations under fair share", rule 5).
// Never a session, nor a job sharing its GPU with a job started in this
// pass.
func (p *pass) overdueVictim(run *runJob, i int32) bool {
	if run.n <= 0 || run.flags&runPinned != 0 {
		return false
	}
	return p.overdueTakes(run, i)
}

// overdueTakes is overdueVictim's rule on the job of run, whatever GPUs
// it holds alone.
func (p *pass) overdueTakes(run *runJob, i int32) bool {
	j := &p.s.Jobs[run.job]
	if rsvProtected(j) || p.dueFirst(j, i) {
		return false
	}
	if p.fair && p.jteam[run.job] != p.jteam[i] {
		if run.flags&runBorrowed != 0 && !p.waitedBound(j) {
			return true
		}
		// Another team's job within its guarantee, or a borrower that
		// had waited its bound: taken only if it started after i was
		// due, on GPUs it knew reserved (mayBackfill let it start
		// there, preemptible at the deadline), even one due itself
		// (wasDue), and only for a job i that has never run: a team
		// lends its guarantee to a reservation once. The two do not
		// hand the GPUs back and forth: once started, i borrows and
		// had waited its bound, and the taken job has run, so its own
		// reservation may not take i back; within its guarantee, it
		// reclaims i after i's minimum runtime (minRunOf), and i,
		// having run, waits then as any borrower (else the reservation
		// and the reclaim would take the GPUs from one another in turn,
		// the lender's jobs never running). A job beyond its team's
		// guarantee cut before it had its lend (lendS) has not had it.
		return j.LastStartTime >= p.dueOf(i) && p.lendLeft(&p.s.Jobs[i])
	}
	return !p.wasDue(j)
}

// dueFirst tells whether running job j started as a job due for a
// reservation (startedDue) that came before job i in the order in which
// due jobs are reserved (compareDue: under fair share those that have
// not had their lend first, then the biggest, then the earliest
// deadline): i's reservation, past its deadline, does not take its GPUs. Else a job its
// reservation had started was preempted within seconds by the next
// one's deadline, and then waited as a job that had had its lend (issue
// 30: the demo's 8-GPU jobs under fair share waited up to 6,299 s).
func (p *pass) dueFirst(j *Job, i int32) bool {
	if !p.startedDue(j) {
		return false
	}
	ran := min(p.now-j.LastStartTime, j.ExecutedS) // this run
	if !(ran > 0) {
		ran = 0
	}
	vj := p.dueKey(j, p.lentHaving(j, j.ExecutedS-ran), j.LastStartTime)
	hi := &p.s.Jobs[i]
	return compareDue(vj, p.dueKey(hi, p.rsvLent(hi), p.now)) < 0
}

// dueKey is job j as a job due for a reservation, its wait as at time
// at (when it started, or now for a waiting job).
func (p *pass) dueKey(j *Job, lent bool, at float64) rsvDue {
	b, w := p.boundOf(j), waitedS(j, p.now)
	dw := p.deadlineWait(b)
	return rsvDue{lent: lent, late: w >= dw+lateBounds*b, deadline: at - w + dw, id: j.ID, gpus: clampGPUs(j.GPUs)}
}

// lateBounds is how many bounds past its deadline a job due for a
// reservation is late: reserved before every job that is not, whatever
// their sizes, the earliest deadline first (compareDue). Reserving the
// biggest first let the 2- and 4-GPU jobs due in a burst of 8-GPU ones
// wait through all of it: on the demo's streams under its settings (a
// 300 s bound, a 30 s minimum runtime), 2-GPU jobs waited up to 2,541 to
// 7,336 s while no 8-GPU job waited more than 700 s; at 6 bounds (2,100
// s there) the longest wait of any size is 2,156 to 2,335 s and an 8-GPU
// job's 504 to 831 s. At 1 bound the 8-GPU jobs waited up to 1,821 s.
const lateBounds = 6

// deadlineWait is the wait at which a job of bound b reaches its
// deadline: b with a lead, twice b without (deadlineOf).
func (p *pass) deadlineWait(b float64) float64 {
	if p.sc.cfg.ReserveLeadS != 0 {
		return b
	}
	return p.dueWait(b) + b
}

// lentTo tells whether running job run, preempted for job i's
// reservation, is another team's that had waited its own bound: its
// team's guaranteed work, which only a reservation past its deadline
// takes (overdueVictim), and only on GPUs it started on once reserved.
func (p *pass) lentTo(run *runJob, i int32) bool {
	return p.fair && p.jteam[run.job] != p.jteam[i] && p.waitedBound(&p.s.Jobs[run.job])
}

// dueOf is when pending job i became due for a reservation: when its
// wait (its age less its run time) reached its bound, or, with a lead
// (Config.ReserveLeadS), its bound less the lead.
func (p *pass) dueOf(i int32) float64 {
	j := &p.s.Jobs[i]
	return p.now - waitedS(j, p.now) + p.dueWait(p.boundOf(j))
}

// LeadHalfBound as Config.ReserveLeadS: each job's lead is half its own
// bound (its team's or the server's), so that it is due at half its
// bound and must start by its bound.
const LeadHalfBound = -1

// dueWait is the wait after which a job of bound b is due for a
// reservation: b, or with a lead (Config.ReserveLeadS) b less the lead,
// never below 0 (due as soon as it cannot start).
func (p *pass) dueWait(b float64) float64 {
	switch l := p.sc.cfg.ReserveLeadS; {
	case l == LeadHalfBound:
		return b / 2
	case l > 0:
		return max(b-l, 0)
	}
	return b
}

// deadlineOf is the deadline of job i, due for a reservation since due:
// when it has waited its bound again since (twice its bound in all), or,
// with a lead (Config.ReserveLeadS), when it has waited its bound: the
// bound is then when it must start, and the lead the time its GPUs have
// to drain toward it (issue 30: live, a job due at its bound of 120 s
// started at its deadline, 230 s, as the reservation promised, not
// within the bound).
func (p *pass) deadlineOf(i int32, due float64) float64 {
	b := p.boundOf(&p.s.Jobs[i])
	if p.sc.cfg.ReserveLeadS != 0 {
		return due - p.dueWait(b) + b
	}
	return due + b
}

// wasDue tells whether running job j was due for a reservation itself
// when it started: it asks several GPUs and had waited its bound. An
// overdue reservation does not take GPUs from it: else two due jobs
// handed a machine to one another, each preempting the other at its
// deadline.
func (p *pass) wasDue(j *Job) bool {
	return clampGPUs(j.GPUs) > 1 && p.waitedBound(j)
}

// startedDue tells whether running job j asks several GPUs and had
// waited, when it started, until it was due for a reservation: its bound,
// or with a lead its bound less the lead (dueWait), from when its GPUs
// drain toward it.
func (p *pass) startedDue(j *Job) bool {
	b := p.boundOf(j)
	return clampGPUs(j.GPUs) > 1 && b > 0 && waitedS(j, p.now) >= p.dueWait(b)
}

// rsvStarted tells whether running job ri (an index in the pass's runs)
// started as a job due for a reservation (startedDue), with reservations
// on under a preemptive policy: the policy does not preempt it for a job
// of its own team. Preempted, it would be due again at once, its deadline
// near or past, and take its GPUs back from the jobs that took them: on
// mixed-8gpu under tiresias-g an 8-GPU job was preempted 11 s after it
// started, took its GPUs back 14 s later, and so on, 1,999 runs cut
// within a minute of their start (issue 30). Another team reclaiming its
// guarantee still takes its GPUs (nextCross), after its minimum runtime
// (minRunOf).
//
// With a lead it counts from the due time, not the bound: a job that its
// reservation started at its deadline, which is its bound less the
// handover, had not waited its bound, and was preempted like any other
// (live, by a new job of its team 55 s after it started; due again at
// once, it took its GPUs back 5 s after two other jobs started on them).
// Overdue reservations still take GPUs from such a job (wasDue keeps the
// bound): counted from the due time there too, an 8-GPU job waited for
// the 2- and 4-GPU jobs that had started due, 1.4 times its bound.
//
// Asked for each victim the policy weighs, for the same runs pass after
// pass: the answer is kept once a pass (runDue).
func (p *pass) rsvStarted(ri int32) bool {
	if !p.rsvOn || !p.rsvPreempt {
		return false
	}
	if len(p.runDue) != len(p.runs) {
		p.runDue = resize(p.runDue, len(p.runs))
		clear(p.runDue)
	}
	switch p.runDue[ri] {
	case 1:
		return true
	case 2:
		return false
	}
	due := p.startedDue(&p.s.Jobs[p.runs[ri].job])
	p.runDue[ri] = 2
	if due {
		p.runDue[ri] = 1
	}
	return due
}

// rsvEarly is a holder of a kept reservation that the walk has not
// reached yet, and the slots its reservation names (nodes mode).
type rsvEarly struct {
	job      int32
	deadline float64
	slots    []int32
	// ready: past its deadline, it can take its GPUs now: each is free
	// or held by a job it may preempt (overdueVictim).
	ready bool
}

// rsvEarlyBegin notes, at the start of the walk, the holders of kept
// reservations and their slots, so that jobs ranked above a holder that
// it could not take its GPUs back from are held off them (rsvEarlyHold).
func (p *pass) rsvEarlyBegin() {
	p.rsvEarlyList = p.rsvEarlyList[:0]
	p.rsvEarlyHeld = p.rsvEarlyHeld[:0]
	if !p.rsvOn || !p.rsvPreempt || p.count || len(p.rsvHolders) == 0 {
		return
	}
	for _, i := range p.rsvHolders {
		due := p.dueOf(i)
		h := rsvEarly{job: i, deadline: p.deadlineOf(i, due)}
		h.ready = p.overdue(i, due)
		for _, g := range p.rsvKeptOf(i).GPUs {
			s := p.cl.slot(g)
			if s < 0 || !p.cl.nodes[p.cl.slotNode[s]].sched {
				h.ready = false // gone or drained: it is reserved afresh
				continue
			}
			h.slots = append(h.slots, int32(s))
		}
		p.rsvEarlyList = append(p.rsvEarlyList, h)
	}
	if !slices.ContainsFunc(p.rsvEarlyList, func(h rsvEarly) bool { return h.ready }) {
		return
	}
	// A holder is not ready if a job it may not preempt holds one of its
	// GPUs, or several jobs share one.
	ks := p.keptSlots()
	notReady := func(s int32) {
		if h := ks[s]; h >= 0 {
			for k := range p.rsvEarlyList {
				if p.rsvEarlyList[k].job == h {
					p.rsvEarlyList[k].ready = false
				}
			}
		}
	}
	// A GPU that several jobs share is ready when each of them may be
	// taken (sharedVictims).
	shared := resize(p.rsvShared, len(p.cl.busy))
	clear(shared)
	p.rsvShared = shared
	for _, s := range p.shared {
		shared[s] = true
	}
	for ri := range p.runs {
		run := &p.runs[ri]
		for _, g := range p.s.Jobs[run.job].Placement {
			if s := p.cl.slot(g); s >= 0 && shared[s] {
				if h := ks[s]; h >= 0 && !p.sharedVictim(run, h) {
					notReady(int32(s))
				}
			}
		}
		for _, s := range p.held[run.lo:run.hi] {
			if h := ks[s]; h >= 0 && !p.overdueVictim(run, h) {
				notReady(s)
			}
		}
	}
}

// rsvEarlyHold holds off the free slots of kept reservations whose
// holders the walk has not reached yet from pending entry e, decided
// next, when e may not use them: past the holder's deadline, when the
// holder can take its GPUs now (ready), no job but the holder may (else
// the jobs ranked above it would take them first, to be preempted at the
// next pass); and a job that the holder would have to wait for (a
// session, never preempted) may only if its time limit ends it by the
// deadline. A session without a limit is not held off (it could be held
// for ever). A batch job the policy ranks above the holder may use them
// before the deadline but for its last minBackfillS (runsBefore): it is
// preempted then if it still holds them (live, jobs started 10 s before
// it were).
// rsvEarlyRelease gives the slots back once e is decided.
func (p *pass) rsvEarlyHold(e *entry) {
	if len(p.rsvEarlyList) == 0 {
		return
	}
	cl := &p.cl
	for k := range p.rsvEarlyList {
		h := &p.rsvEarlyList[k]
		if h.job == e.job || !p.rsvIsDue[h.job] || p.rsvEarlyMay(e.job, h) {
			continue
		}
		for _, s := range h.slots {
			if cl.busy[s] {
				continue
			}
			cl.busy[s] = true
			if n := cl.slotNode[s]; cl.nodes[n].sched {
				cl.setFree(int(n), cl.nodes[n].free-1)
			}
			cl.frDirty = true
			p.rsvEarlyHeld = append(p.rsvEarlyHeld, s)
		}
	}
}

// rsvEarlyMay tells whether pending job i may use the slots kept for
// holder h, which the walk has not reached (rsvEarlyHold).
func (p *pass) rsvEarlyMay(i int32, h *rsvEarly) bool {
	if h.ready {
		return false
	}
	j := &p.s.Jobs[i]
	if rsvProtected(j) {
		if !hasLimit(j) {
			return true
		}
		ran := j.ExecutedS
		if !(ran > 0) || math.IsInf(ran, 1) {
			ran = 0
		}
		return p.now+max(j.TimeLimitS-ran, 0) <= h.deadline
	}
	// Under fair share too, for a job that has waited its bound (a
	// team's guaranteed work waits at most its bound, and 30 s more
	// here): live, the demo's jobs that had waited theirs started 3.5
	// to 11 s before an 8-GPU job's deadline and were preempted at it.
	return p.runsBefore(h.deadline)
}

// rsvEarlyRelease gives back the slots rsvEarlyHold held off: still free,
// none took them.
func (p *pass) rsvEarlyRelease() {
	if len(p.rsvEarlyHeld) == 0 {
		return
	}
	cl := &p.cl
	for _, s := range p.rsvEarlyHeld {
		cl.busy[s] = false
		if n := cl.slotNode[s]; cl.nodes[n].sched {
			cl.setFree(int(n), cl.nodes[n].free+1)
		}
	}
	cl.frDirty = true
	p.rsvEarlyHeld = p.rsvEarlyHeld[:0]
}
