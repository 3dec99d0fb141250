package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

// Salus co-location in the pass (docs/salus.md, docs/scheduling.md). A
// pending sharing job (Job.Sharing, one GPU, a memory estimate) may join
// a GPU that already hosts sharing jobs and no other: the GPU's jobs are
// replayed into a core/lanes GPU, and the job joins where the lanes admit
// it, which is where the safety condition holds. Among such GPUs it takes
// the one it leaves fullest (then the first in node order). Whether it
// looks for one at all is Config.SharePlacement's rule: under
// ShareFreeFirst only when no GPU is free, or when whole-GPU jobs wait
// for more GPUs than are free; under ShareFullestFirst always. Otherwise
// it goes through the ordinary walk like any one-GPU job, and the GPU it
// takes becomes shareable. Nothing of this runs unless a pending job may
// share.

// Where a sharing job goes (Config.SharePlacement).
const (
	// ShareFreeFirst: a sharing job takes a free GPU when one is free. It
	// joins a shared GPU's lanes only when no GPU is free, or when the
	// whole-GPU jobs still waiting in the pass ask for at least as many
	// GPUs as are free: packing then leaves the free GPUs to them. The
	// default: jobs that share a GPU take turns and run slower, so they
	// share only when that buys a GPU for someone.
	ShareFreeFirst = "free-first"
	// ShareFullestFirst: a sharing job joins the shared GPU it leaves
	// fullest whenever one has room, and takes a free GPU only when none
	// has: it always packs. The rule before ShareFreeFirst, kept to
	// compare the two (docs/salus.md, "Where a sharing job goes").
	ShareFullestFirst = "fullest-first"
)

// SharePlacements lists the values Config.SharePlacement accepts.
func SharePlacements() []string { return []string{ShareFreeFirst, ShareFullestFirst} }

func checkSharePlacement(rule string) (string, error) {
	switch rule {
	case "":
		return ShareFreeFirst, nil
	case ShareFreeFirst, ShareFullestFirst:
		return rule, nil
	}
	return "", fmt.Errorf("unknown share placement %q (known: %s, %s)", rule, ShareFreeFirst, ShareFullestFirst)
}

// maxShareMiB bounds a sharing job's P and E: larger estimates are not
// believed, and the job runs alone.
const maxShareMiB = 1 << 40

// sharesGPU tells whether j may share its GPU: it opted in, needs one
// GPU, and has a usable memory estimate. Other jobs are exclusive.
func sharesGPU(j *Job) bool {
	return j.Sharing && j.GPUs == 1 &&
		j.MemPersistentMiB >= 0 && j.MemEphemeralMiB >= 0 &&
		j.MemPersistentMiB <= maxShareMiB && j.MemEphemeralMiB <= maxShareMiB &&
		j.MemPersistentMiB+j.MemEphemeralMiB > 0
}

// shareState is the co-location state of one pass.
type shareState struct {
	on   bool    // a pending job may share: the rest is built
	at   []int32 // per slot: its index in gpus, or -1
	gpus []shareGPU
	// wholeGPUs is how many GPUs the pending jobs that take whole GPUs
	// still ask for: those not started yet in this pass, each asking
	// for no more GPUs than the schedulable nodes have.
	wholeGPUs int
	mem       []memest.Estimate // scratch for the replay
	ids       []int32           // scratch
}

// shareGPU is one GPU that hosts jobs, as co-location sees it.
type shareGPU struct {
	slot int32
	// excl: a job that does not share holds it; no job joins.
	excl bool
	// members are the sharing jobs on it (indices in Snapshot.Jobs).
	members []int32
	// claim is the running job whose preemption would free the GPU (its
	// index in pass.runs), or -1.
	claim int32
	// lg holds the members in lanes; nil when the GPU cannot take more
	// (unknown capacity, or its jobs already break the safety condition).
	lg *lanes.GPU
	// sumP and maxE bound what a join needs: a job fits only if
	// sumP + P + max(maxE, E) <= capacity.
	sumP, maxE, capMiB int64
}

// shareScan notes, during scan, a pending job that may share.
func (p *pass) shareScan(j *Job) {
	if !p.count && !p.sh.on && sharesGPU(j) {
		p.sh.on = true
	}
}

// shareBuild builds the co-location state once the running jobs' GPUs
// are known (after cluster.index).
func (p *pass) shareBuild() {
	sh := &p.sh
	sh.at = resize(sh.at, len(p.cl.busy))
	for i := range sh.at {
		sh.at[i] = -1
	}
	sh.gpus = sh.gpus[:0]
	jobs := p.s.Jobs
	for i := range jobs {
		if p.outcome[i] != outRunning {
			continue
		}
		j := &jobs[i]
		member := sharesGPU(j) && len(j.Placement) == 1
		for _, g := range j.Placement {
			s := p.cl.slot(g)
			if s < 0 {
				continue
			}
			st := p.shareGPUAt(int32(s))
			if member {
				st.members = append(st.members, int32(i))
			} else {
				st.excl = true
			}
		}
	}
	for ri := range p.runs {
		r := &p.runs[ri]
		for _, s := range p.held[r.lo:r.hi] {
			if k := sh.at[s]; k >= 0 {
				sh.gpus[k].claim = int32(ri)
			}
		}
	}
	for k := range sh.gpus {
		p.shareReplay(&sh.gpus[k])
	}
	sh.wholeGPUs = 0
	for i := range jobs {
		if p.outcome[i] == outWaiting && p.asksWholeGPUs(&jobs[i]) {
			sh.wholeGPUs += jobs[i].GPUs
		}
	}
}

// asksWholeGPUs tells whether pending job j takes whole GPUs that it
// could get: it does not share, and the schedulable nodes have enough.
func (p *pass) asksWholeGPUs(j *Job) bool {
	return !sharesGPU(j) && j.GPUs >= 1 && j.GPUs <= p.cl.capacity
}

// packs tells whether a sharing job looks for a shared GPU to join
// before it looks for a free one (Config.SharePlacement).
func (p *pass) packs() bool {
	free := p.cl.free
	return p.sc.cfg.SharePlacement == ShareFullestFirst || free <= 0 || p.sh.wholeGPUs >= free
}

// shareGPUAt returns slot s's record, adding an empty one.
func (p *pass) shareGPUAt(s int32) *shareGPU {
	sh := &p.sh
	if k := sh.at[s]; k >= 0 {
		return &sh.gpus[k]
	}
	sh.at[s] = int32(len(sh.gpus))
	n := len(sh.gpus)
	if n < cap(sh.gpus) {
		sh.gpus = sh.gpus[:n+1]
		m := sh.gpus[n].members[:0]
		sh.gpus[n] = shareGPU{members: m}
	} else {
		sh.gpus = append(sh.gpus, shareGPU{})
	}
	st := &sh.gpus[n]
	st.slot, st.claim = s, -1
	return st
}

// shareReplay admits st's members to a fresh lanes GPU, earliest started
// first (then by ID): deterministic, whatever the snapshot's order. The
// estimates are already padded, so the lanes add no padding.
func (p *pass) shareReplay(st *shareGPU) {
	st.lg, st.sumP, st.maxE = nil, 0, 0
	i := p.cl.slotNode[st.slot]
	st.capMiB = p.cl.gpus(i)[st.slot-p.cl.nodes[i].first].MemMiB
	if st.excl || len(st.members) == 0 || st.capMiB <= 0 {
		return
	}
	jobs := p.s.Jobs
	slices.SortFunc(st.members, func(a, b int32) int {
		ja, jb := &jobs[a], &jobs[b]
		if c := cmp.Compare(ja.LastStartTime, jb.LastStartTime); c != 0 {
			return c
		}
		return cmp.Compare(ja.ID, jb.ID)
	})
	lg, err := lanes.NewGPU(int(st.slot), st.capMiB, lanes.Config{Padding: memest.NoPadding, AgingS: -1})
	if err != nil {
		return
	}
	for _, i := range st.members {
		j := &jobs[i]
		if _, err := lg.Admit(laneJob(j), 0); err != nil {
			return // its jobs already break the condition: none joins
		}
		st.sumP += j.MemPersistentMiB
		st.maxE = max(st.maxE, j.MemEphemeralMiB)
	}
	st.lg = lg
}

func laneJob(j *Job) lanes.Job {
	return lanes.Job{ID: j.ID, Memory: memest.Estimate{
		PersistentMiB: j.MemPersistentMiB, EphemeralMiB: j.MemEphemeralMiB, Source: memest.Declared,
	}}
}

// joinable tells whether st may take another sharing job now.
func (p *pass) joinable(st *shareGPU) bool {
	return st.lg != nil && !st.excl && p.cl.busy[st.slot] &&
		p.cl.nodes[p.cl.slotNode[st.slot]].sched
}

// tryJoin starts pending entry next (which peek returned) on a shared
// GPU, if one has room for it, and tells whether it did.
func (p *pass) tryJoin(next *entry) bool {
	j := &p.s.Jobs[next.job]
	if !sharesGPU(j) || !p.packs() {
		return false
	}
	lj := laneJob(j)
	best, bestFree := -1, int64(0)
	for k := range p.sh.gpus {
		st := &p.sh.gpus[k]
		if !p.joinable(st) || st.sumP+j.MemPersistentMiB+max(st.maxE, j.MemEphemeralMiB) > st.capMiB || p.rsvBars(st.slot, next.job) {
			continue
		}
		pl, err := st.lg.Plan(lj)
		if err != nil {
			continue
		}
		if best < 0 || pl.FreeAfterMiB < bestFree || pl.FreeAfterMiB == bestFree && st.slot < p.sh.gpus[best].slot {
			best, bestFree = k, pl.FreeAfterMiB
		}
	}
	if best < 0 {
		return false
	}
	st := &p.sh.gpus[best]
	if _, err := st.lg.Admit(lj, p.now); err != nil {
		return false // Plan just said yes: cannot happen
	}
	st.members = append(st.members, next.job)
	st.sumP += j.MemPersistentMiB
	st.maxE = max(st.maxE, j.MemEphemeralMiB)
	if st.claim >= 0 {
		p.pin(&p.runs[st.claim])
		st.claim = -1
	}
	e := p.pop(next)
	if p.teams {
		p.teamStart(e.job, +1)
		if p.fair {
			p.lendCheck(p.jteam[e.job])
		}
	}
	p.d.Starts = append(p.d.Starts, Start{JobID: e.id, GPUs: []gpu.Ref{p.cl.ref(st.slot)}})
	p.startJob = append(p.startJob, e.job)
	p.outcome[e.job] = outStarted
	return true
}

// pin keeps a running job that now shares its GPU with a job started in
// this pass: preempting it would free no GPU. Before the running jobs
// are merged into the walk, only the counts of what preemption could
// free change (merge counts open jobs only).
func (p *pass) pin(r *runJob) {
	r.flags |= runPinned
	if r.state != runOpen || !p.preempt {
		return
	}
	if p.merged {
		p.keep(r)
		return
	}
	r.state = runKept
	if p.fair {
		p.teamKeep(r)
	}
	p.cl.reclTotal -= int(r.n)
	if p.pol.queues != nil {
		p.runQAdd(r.job, -int(r.n))
	}
}

// shareStarted records a job the walk started on fresh GPUs: a sharing
// job's GPU becomes shareable, with it alone; another job's GPUs take no
// sharer.
func (p *pass) shareStarted(job int32, slots []int32) {
	j := &p.s.Jobs[job]
	member := sharesGPU(j) && len(slots) == 1
	if p.asksWholeGPUs(j) {
		p.sh.wholeGPUs -= j.GPUs
	}
	for _, s := range slots {
		st := p.shareGPUAt(s)
		st.members, st.excl, st.claim = st.members[:0], !member, -1
		if member {
			st.members = append(st.members, job)
		}
		p.shareReplay(st)
	}
}

// appendShareNeeds says what a sharing job that could not start needs,
// in memory: "needs 1.7 GiB persistent + 4.9 GiB ephemeral; the shared
// GPU with the most room, node-1/2, has 3.0 GiB free; no GPU is free".
func (p *pass) appendShareNeeds(b []byte, e *entry) []byte {
	j := &p.s.Jobs[e.job]
	b = append(b, "needs "...)
	b = appendGiB(b, j.MemPersistentMiB)
	b = append(b, " persistent + "...)
	b = appendGiB(b, j.MemEphemeralMiB)
	b = append(b, " ephemeral"...)
	best, room := -1, int64(0)
	for k := range p.sh.gpus {
		st := &p.sh.gpus[k]
		if !p.joinable(st) {
			continue
		}
		if f := st.lg.FreeMiB(); best < 0 || f > room || f == room && st.slot < p.sh.gpus[best].slot {
			best, room = k, f
		}
	}
	if best < 0 {
		b = append(b, "; no GPU hosts only sharing jobs"...)
	} else {
		ref := p.cl.ref(p.sh.gpus[best].slot)
		b = append(b, "; the shared GPU with the most room, "...)
		b = append(b, ref.Node...)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(ref.Index), 10)
		b = append(b, ", has "...)
		b = appendGiB(b, room)
		b = append(b, " free"...)
	}
	if p.cl.free <= 0 {
		return append(b, "; no GPU is free"...)
	}
	b = append(b, "; "...)
	b = strconv.AppendInt(b, int64(p.cl.free), 10)
	if p.cl.free == 1 {
		return append(b, " GPU free"...)
	}
	return append(b, " GPUs free"...)
}

// appendGiB appends MiB as GiB with one decimal.
func appendGiB(b []byte, mib int64) []byte {
	b = strconv.AppendFloat(b, float64(mib)/1024, 'f', 1, 64)
	return append(b, " GiB"...)
}
