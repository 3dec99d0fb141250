package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// pass runs one scheduling pass: requeue jobs lost with their machine, ask
// the scheduler, apply its decisions.
func (e *Engine) pass(ctx context.Context) error {
	if !e.mayDecide(ctx) {
		return nil
	}
	ph := startPhases()
	defer e.stats.wholePass(ph)
	e.retryRecords(ctx)
	e.resolveLost(ctx, e.cfg.Now())
	jobs, err := e.cfg.Store.UnfinishedEngineJobs(ctx)
	if err != nil {
		return err
	}
	now := e.cfg.Now()
	e.refreshNodeStates(ctx, now)
	e.checkHealth(ctx, now)
	jobs = e.reconcile(ctx, jobs, now)
	adopted := e.heldAdopted
	e.heldAdopted = nil
	defer e.adoptedExits(ctx, adopted) // their runs checked: after this pass, as exits come between passes
	e.saveStops(ctx)
	e.stopQueued(ctx)
	jobs = e.requeueLost(ctx, jobs, now)
	jobs = e.carryOutCancels(ctx, jobs, now)
	if len(e.waiting) > 0 {
		e.forgetWaits(newPassJobs(jobs))
	}
	e.enforceTimeLimits(ctx, jobs, now)
	jobs, gated := e.gate(ctx, jobs, now)
	jobs = e.startPromised(ctx, jobs, now)
	e.learnProfiles(ctx, now)
	e.recordResumes(ctx, now, true)
	jobs = e.reheld(ctx, jobs, now)
	snap, byID := e.snapshot(jobs, now)
	if e.cfg.GPUTime != nil {
		snap.GPUTimeDist = e.cfg.GPUTime.Dist(snap.Jobs)
	}
	if snap.Teams, err = e.teams(ctx, jobs, now); err != nil {
		return err
	}
	snap.Reservations = e.keptRsv
	ph.mark(phaseLoad)
	began := time.Now()
	d := e.cfg.Scheduler.Schedule(snap)
	e.recheck = recheckTime(d.Recheck)
	e.noteReservations(d.Reservations, d.Waits, snap.Now)
	e.storeReservations(ctx, now)
	starts, held := e.deferStarts(d.Starts, d.Preempts, byID)
	e.withdrawn(snap, d.Preempts, byID, now)
	d.Starts, d.Waits = starts, append(append(d.Waits, held...), gated...)
	e.explainAccounts(d.Waits, byID)
	e.stats.pass(time.Since(began), len(d.Starts))
	ph.mark(phaseSchedule)
	e.recordAllocations(ctx, snap, d, byID)
	if err := e.recordQueues(ctx, d.QueueChanges); err != nil {
		return err
	}
	for _, p := range d.Preempts {
		e.preempt(ctx, p, byID)
	}
	e.noteStopping()
	recorded := e.recordStarts(ctx, d.Starts, byID, now)
	for _, s := range d.Starts {
		e.start(ctx, byID.job(s.JobID), s.GPUs, now, recorded)
	}
	e.heldFromStart(ctx, jobs, d.Starts, byID, now)
	if len(d.Starts) > 0 {
		e.recordResumes(ctx, now, false)
	}
	ph.mark(phaseApply)
	defer ph.mark(phaseRecord)
	e.forecast(ctx, snap, d, jobs, now)
	snap.Jobs = afterStarts(snap.Jobs, d.Starts, e.runs)
	if err := e.recordShares(ctx, snap, d, now); err != nil {
		return err
	}
	return e.recordReasons(ctx, d.Waits, now)
}

// requeueLost puts back in the queue the jobs recorded as running that no
// connected machine runs: their machine restarted without them, or has been
// gone for longer than LostAfter. It returns jobs as they are now.
func (e *Engine) requeueLost(ctx context.Context, jobs []Job, now time.Time) []Job {
	out := jobs[:0]
	for i := range jobs {
		j := &jobs[i]
		if j.State != job.Running || e.runs[j.ID] != nil {
			out = keep(out, jobs, i)
			continue
		}
		node := placementNode(j.Placement)
		var reason string
		// ended is when the run ended as far as the engine knows: now, or
		// when its machine was lost. That is what its record says, and
		// what its time, its service and the work a resume redoes count
		// up to: not the LostAfter the engine waited for the machine, nor
		// a database outage that kept it from recording the loss, nor the
		// time a killed agent took to come back without the run.
		ended := now
		endedAt := func(lost time.Time) {
			if j.LastStartAt == nil || !lost.Before(*j.LastStartAt) {
				ended = lost
			}
		}
		if e.node(node) != nil {
			reason = fmt.Sprintf("requeued: %s no longer runs it", node)
			if lost, ok := e.lostAt[node]; ok {
				endedAt(lost)
			}
		} else {
			since, ok := e.lostSince[node]
			if !ok {
				// Not heard since this engine began leading: the replica
				// that led before may keep it running for TakeoverHold.
				since = e.started.Add(e.cfg.TakeoverHold)
				e.lostSince[node] = since
			} else {
				endedAt(since)
			}
			if now.Sub(since) < e.cfg.LostAfter {
				out = keep(out, jobs, i)
				continue
			}
			reason = fmt.Sprintf("requeued: node %s lost, not back after %s", node, now.Sub(since).Round(time.Second))
		}
		to := job.Queued
		if req, ok := stopRequested(j, j.Run); ok && req.To != job.Failed {
			// It was asked to stop: it ends as asked (a cancelled job is
			// not started again), the loss said beside the reason.
			to, reason = req.To, req.Reason+"; its run was not seen to end: "+strings.TrimPrefix(reason, "requeued: ")
		}
		if err := e.cfg.Store.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: j.Run}, to, nil, reason, usage.Service{}, ended); err != nil {
			e.cfg.Logger.Error("requeue lost job", "job", j.ID, "err", err)
			out = keep(out, jobs, i)
			continue
		}
		e.placedAt(j.Placement, now)
		e.endedWithoutExit(job.RunRef{Job: j.ID, Run: j.Run}, node, now)
		e.cfg.Logger.Warn("job of a lost run ended", "job", j.ID, "state", to, "reason", reason)
		if to.Final() {
			continue
		}
		if to == job.Queued {
			e.stats.requeued(RequeueNodeLost)
		}
		e.waitFrom(j.ID, now)
		j.State, j.Placement = to, nil
		out = keep(out, jobs, i)
	}
	return out
}

// keep adds jobs[i] to out, the jobs kept of a filter that writes them
// back into jobs' own array (out began as jobs[:0]): until a job is left
// out, each is already in its place and nothing is copied. A pass's
// filters over a long queue keep nearly every job.
func keep(out, jobs []Job, i int) []Job {
	if len(out) == i {
		return out[:i+1]
	}
	return append(out, jobs[i])
}

// snapshot describes the cluster to the scheduler.
func (e *Engine) snapshot(jobs []Job, now time.Time) (sched.Snapshot, *passJobs) {
	snap := sched.Snapshot{Now: seconds(now)}
	e.expireAccounts(now)
	for _, n := range e.Nodes() {
		cpus, mem := n.Resources()
		sn := sched.Node{Name: n.Name(), CPUs: cpus, MemMiB: mem, Unschedulable: e.unschedulable(n.Name())}
		for _, d := range n.Devices() {
			if e.gpuUnhealthy(n.Name(), d.Index) {
				continue // out of service: no new jobs
			}
			if e.strayGPU(n.Name(), d.Index) {
				continue // a run the cluster does not want has yet to leave it
			}
			sn.GPUs = append(sn.GPUs, sched.GPU{Index: d.Index, MemMiB: d.MemMiB})
		}
		snap.Nodes = append(snap.Nodes, sn)
	}
	// Only the pass reads its snapshot and index (the forecast copies
	// what it keeps), so the next pass writes over their arrays: at
	// 10,000 queued they were 3.9 MB a pass to allocate and clear.
	b := &e.snapBuf
	byID := &passJobs{jobs: jobs, ids: b.ids[:0], pos: b.pos[:0]}
	snap.Jobs = b.jobs[:0]
	gpuMiB := smallestGPU(snap.Nodes)
	for i := range jobs {
		j := &jobs[i]
		if j.State.Waiting() && j.RetryAt != nil && j.RetryAt.After(now) {
			continue // waits out its retry backoff
		}
		byID.add(j.ID, i)
		snap.Jobs = append(snap.Jobs, e.schedJob(j, now, gpuMiB))
	}
	byID.index()
	b.keep(snap.Jobs, byID)
	// A job kept back by a handover is seen running on the GPUs promised
	// to it; its victims are leaving (schedJob).
	e.promised.Present(snap.Jobs, snap.Now)
	return snap, byID
}

// withdrawn shows again as waiting, in snap (the pass's snapshot), each
// job that the pass preempted while it was shown running on the GPUs
// promised to it (Promises.Present) and so lost its promise
// (deferStarts): what the pass does after its decisions (the forecast,
// the teams' figures) sees the job as it is. Without it the forecast gave
// such a job none until the next, its range flipping to "not forecast
// yet" (TestWithdrawnPromiseIsForecast).
func (e *Engine) withdrawn(snap sched.Snapshot, preempts []sched.Preempt, byID *passJobs, now time.Time) {
	jobs := snap.Jobs
	for _, p := range preempts {
		if e.runs[p.JobID] != nil {
			continue // it runs: a preemption like any
		}
		k, ok := byID.find(p.JobID)
		if !ok || !byID.jobs[k].State.Waiting() {
			continue
		}
		for i := range jobs {
			if jobs[i].ID == p.JobID && jobs[i].State == sched.Running {
				jobs[i] = e.schedJob(&byID.jobs[k], now, smallestGPU(snap.Nodes))
				break
			}
		}
	}
}

// passBuffers are the arrays a pass's snapshot and index grew, kept for
// the next pass. A snapshot's jobs hold references (placements, names),
// so the part of the array the last pass used beyond this one's length is
// cleared: nothing gone stays reachable from it.
type passBuffers struct {
	jobs []sched.Job
	ids  []int64
	pos  []int32
}

// keep takes jobs and byID's arrays for the next pass.
func (b *passBuffers) keep(jobs []sched.Job, byID *passJobs) {
	if len(b.jobs) > len(jobs) {
		clear(b.jobs[len(jobs):])
	}
	b.jobs, b.ids, b.pos = jobs, byID.ids, byID.pos
}

// passJobs are the jobs a pass schedules (snapshot), by ID: an index into
// the pass's jobs rather than a copy of each. The pass leaves its jobs as
// they are once they are indexed.
//
// The store gives the jobs by ID, so the index is their IDs in that order,
// searched (at 10,000 jobs a tenth of a map's size, built without
// hashing); jobs out of order are indexed by a map.
type passJobs struct {
	jobs []Job
	ids  []int64 // of the jobs indexed, in their order
	pos  []int32 // of each of ids in jobs
	at   map[int64]int32
	// inOrder: every job of jobs is indexed, and they are in ID order
	// (ids and pos unused).
	inOrder bool
}

// newPassJobs indexes jobs by ID. Jobs in ID order, as the store gives
// them, are their own index: searched where they are.
func newPassJobs(jobs []Job) *passJobs {
	inOrder := true
	for k := 1; k < len(jobs) && inOrder; k++ {
		inOrder = jobs[k].ID > jobs[k-1].ID
	}
	if inOrder {
		return &passJobs{jobs: jobs, inOrder: true}
	}
	p := &passJobs{jobs: jobs, ids: make([]int64, 0, len(jobs)), pos: make([]int32, 0, len(jobs))}
	for i := range jobs {
		p.add(jobs[i].ID, i)
	}
	p.index()
	return p
}

// add indexes job id at jobs[i].
func (p *passJobs) add(id int64, i int) {
	p.ids, p.pos = append(p.ids, id), append(p.pos, int32(i))
}

// index finishes the index once every job is added: the jobs' IDs are
// searched where they are in order, else mapped.
func (p *passJobs) index() {
	for k := 1; k < len(p.ids); k++ {
		if p.ids[k] <= p.ids[k-1] {
			p.at = make(map[int64]int32, len(p.ids))
			for k, id := range p.ids {
				p.at[id] = p.pos[k]
			}
			return
		}
	}
}

// find returns the place of job id in the pass's jobs; ok is false for
// a job the pass does not schedule.
func (p *passJobs) find(id int64) (i int, ok bool) {
	if p == nil {
		return 0, false
	}
	if p.at != nil {
		k, ok := p.at[id]
		return int(k), ok
	}
	if p.inOrder {
		lo, hi := 0, len(p.jobs)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if p.jobs[m].ID < id {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo, lo < len(p.jobs) && p.jobs[lo].ID == id
	}
	k, ok := slices.BinarySearch(p.ids, id)
	if !ok {
		return 0, false
	}
	return int(p.pos[k]), true
}

// get returns job id of the pass; ok is false for a job the pass does
// not schedule.
func (p *passJobs) get(id int64) (j Job, ok bool) {
	i, ok := p.find(id)
	if !ok {
		return Job{}, false
	}
	return p.jobs[i], true
}

// job returns job id of the pass, the zero Job for one it does not
// schedule.
func (p *passJobs) job(id int64) Job {
	j, _ := p.get(id)
	return j
}

// schedJob is j as the scheduler sees it at now; gpuMiB is the memory of
// the smallest GPU (sharing.go).
func (e *Engine) schedJob(j *Job, now time.Time, gpuMiB int64) sched.Job {
	sj := sched.Job{
		ID: j.ID, Team: j.Team, User: j.User, GPUs: j.GPUs, GPUMemMiB: j.GPUMemMiB,
		SubmitTime: seconds(j.SubmittedAt), ExecutedS: j.ExecutedS,
		AttainedService: j.AttainedService, DurationS: j.SimDuration,
		TimeLimitS: j.TimeLimit.Seconds(), Model: j.Model, Queue: j.Queue,
	}
	shareable(&sj, j, gpuMiB)
	e.cpuProfile(&sj, j)
	if j.State.Waiting() {
		sj.AvoidNodes, _ = e.avoided(j.Account)
	}
	if j.LastStartAt != nil {
		sj.LastStartTime = seconds(*j.LastStartAt)
	}
	if j.ReenteredAt != nil {
		sj.ReenteredAt = seconds(*j.ReenteredAt)
	}
	sj.Interactive = j.Session != nil && j.InteractivePriority
	switch {
	case j.Session != nil:
		sj.Class = sched.ClassSession
	case j.Priority == job.PriorityHigh:
		sj.Class = sched.ClassHigh
	case j.Priority == job.PriorityLow:
		sj.Class = sched.ClassLow
	}
	if j.State == job.Running {
		sj.State = sched.Running
		if e.stopping(j.ID) {
			sj.State = sched.Leaving // its GPUs change hands once it exits (deferStarts)
		}
		sj.Placement = slices.Clone(j.Placement)
		if j.LastStartAt != nil {
			acc, at := j.accrual(), now
			if r := e.runs[j.ID]; r != nil && r.id == j.Run && !r.stopAsked.IsZero() && r.stopAsked.Before(now) {
				at = r.stopAsked // its handover counts for no rank (run.handover)
			}
			sv := usage.Service{ExecutedS: sj.ExecutedS, GPUSeconds: sj.AttainedService}.Ran(at.Sub(*j.LastStartAt).Seconds(), acc)
			sj.ExecutedS, sj.AttainedService, sj.HeldGPUs = sv.ExecutedS, sv.GPUSeconds, acc.Held
		}
	}
	return sj
}

// preempt stops the run of p's job; byID are the jobs of the pass.
func (e *Engine) preempt(ctx context.Context, p sched.Preempt, byID *passJobs) {
	r, ok := e.runs[p.JobID]
	if !ok || r.stop != "" {
		return // not started (a promise withdrawn: deferStarts), or stopping
	}
	reclaimer := ""
	if p.Reclaim {
		reclaimer = byID.job(p.For).Team
	}
	e.stats.preempted(byID.job(p.JobID).Team, reclaimer)
	r.stop, r.reason = job.Preempted, preemptReason(p, byID.job(p.JobID))
	e.stopAll(ctx, p.JobID, r)
	e.cfg.Logger.Info("job preempted", "job", p.JobID, "reason", r.reason)
}

// preemptReason is what the page of j, preempted by p, says: the
// scheduler's reason, and for a session (which the scheduler preempts
// only to give borrowed GPUs back) what stopping it loses.
func preemptReason(p sched.Preempt, j Job) string {
	if j.Session == nil {
		return p.Reason
	}
	return p.Reason + "; " + j.Session.Type.StopLoses()
}

// start records that j runs on gpus, then starts one part of it on each
// machine those GPUs span. If a part cannot start, the job fails and the
// parts already started are stopped.
// recorded are the starts recordStarts recorded, by job.
func (e *Engine) start(ctx context.Context, j Job, gpus []gpu.Ref, now time.Time, recorded map[int64]startRecord) {
	if ok, unknown := e.startable(j, gpus); !ok {
		if unknown != "" {
			e.cfg.Logger.Error("scheduler placed a job on an unknown node", "job", j.ID, "node", unknown)
		}
		return
	}
	var order []string
	perNode := make(map[string][]int)
	for _, g := range gpus {
		if _, ok := perNode[g.Node]; !ok {
			order = append(order, g.Node)
		}
		perNode[g.Node] = append(perNode[g.Node], g.Index)
	}
	rec, ok := recorded[j.ID]
	if !ok {
		rec.run, rec.err = e.cfg.Store.MarkStarted(ctx, j.ID, slices.Clone(gpus), now)
	}
	id, err := rec.run, rec.err
	if err != nil {
		e.cfg.Logger.Error("record job start", "job", j.ID, "err", err)
		return
	}
	e.reasons.forget(j.ID)
	e.placedAt(gpus, now)
	e.observeStart(j, now)
	if asked, ok := e.handover[j.ID]; ok {
		delete(e.handover, j.ID)
		if !asked.IsZero() {
			e.stats.handover(now.Sub(asked))
		}
	}
	r := &run{id: id, parts: make(map[string]bool), started: now, failures: j.Failures, retries: j.Retries, gpus: perNode,
		ended: usage.Service{ExecutedS: j.ExecutedS, GPUSeconds: j.AttainedService}, acc: usage.Whole(j.GPUs), learn: true}
	if j.Failures > 0 {
		r.lastCode = j.ExitCode
	}
	e.runs[j.ID] = r
	gang := e.gang(j, r, order, perNode)
	for rank, name := range order {
		spec := job.Spec{
			JobID: j.ID, Run: id, Command: j.Command, GPUs: perNode[name],
			SimRemaining: time.Duration((j.SimDuration - j.ExecutedS) * float64(time.Second)),
			Memory:       simMemory(j),
			Env:          j.Env, Dir: j.Dir, Array: j.Array,
			Account: j.Account, Image: j.Image, Session: j.Session, Name: j.Name, Team: j.Team,
		}
		if gang != nil {
			g := *gang
			g.Rank = rank
			spec.Gang = &g
		}
		if j.TimeLimit > 0 {
			spec.TimeLeft = max(job.TimeLeft(j.TimeLimit, executed(j, now)), time.Second)
		}
		shareSpec(&spec, j, e.smallestGPU())
		spec.Resources = e.resourcesFor(j.ID, name)
		if err := e.node(name).Start(ctx, spec); err != nil {
			var refusal *job.AccountError
			e.cfg.Logger.Warn("job failed to start", "job", j.ID, "node", name, "err", err)
			// A machine that went away is not the job's fault: it waits again.
			code := -1
			r.stop, r.reason, r.code = job.Failed, err.Error(), &code
			switch {
			case errors.Is(err, job.ErrDisconnected) || ctx.Err() != nil:
				// It may have started before the answer was lost, or the
				// engine stops (the server shuts down) with the start in
				// flight; neither is the job's fault. The part
				// counts as running until its machine says otherwise or
				// has fenced it (losePart).
				r.parts[name] = true
				r.stop, r.reason, r.code = "", "", nil
				why := name + " disconnected while starting it"
				if ctx.Err() != nil {
					why = "the server stopped while starting it on " + name
				}
				e.losePart(ctx, j.ID, r, name, why)
				return
			case errors.Is(err, job.ErrBusy):
				r.stop, r.reason, r.code = job.Queued, "requeued: an earlier run of the job still stops on "+name, nil
			case errors.As(err, &refusal):
				// Not the job's fault: it waits for a machine where its
				// owner has an account (accounts.go).
				if refusal.Node == "" {
					refusal.Node = name
				}
				e.refuseAccount(refusal, now)
				r.stop, r.reason, r.code = job.Queued, refusal.Error(), nil
			}
			if len(r.parts) == 0 {
				delete(e.runs, j.ID)
				if err := e.cfg.Store.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: id}, r.stop, r.code, r.reason, r.handover(now), now); err != nil {
					e.cfg.Logger.Error("record failed start", "job", j.ID, "err", err)
				} else if r.stop.Waiting() {
					e.waitFrom(j.ID, now)
				}
				return
			}
			e.stopAll(ctx, j.ID, r)
			return
		}
		r.parts[name] = true
	}
	e.cfg.Logger.Info("job started", "job", j.ID, "gpus", gpuNames(gpus))
}

// StartsRecorder is the part of Store that records the starts of a pass
// in one transaction, each start succeeding or failing on its own.
type StartsRecorder interface {
	// MarkStartedAll records starts as MarkStarted does each, and returns
	// each one's run number or error, by index; err is set only when
	// none was recorded.
	MarkStartedAll(ctx context.Context, starts []StartRecord, now time.Time) (runs []int64, errs []error, err error)
}

// StartRecord is one start of a waiting job on placement. CPUs are the
// whole CPUs it is told on its machines (job.Resources.Env), summed: what
// sacct's AllocCPUS says of the run once it has ended; 0 when none were
// allocated (machines that report no CPUs).
type StartRecord struct {
	JobID     int64
	Placement []gpu.Ref
	CPUs      int64
}

// startRecord is how the store took a start: its run, or why not.
type startRecord struct {
	run int64
	err error
}

// recordStarts records the pass's starts in one store call, with the
// CPUs each is given (the pass's allocations: recordAllocations). Each
// start is recorded before its machines are asked to start it, as ever.
func (e *Engine) recordStarts(ctx context.Context, starts []sched.Start, byID *passJobs, now time.Time) map[int64]startRecord {
	if len(starts) == 0 {
		return nil
	}
	recs := make([]StartRecord, 0, len(starts))
	for _, s := range starts {
		if ok, _ := e.startable(byID.job(s.JobID), s.GPUs); ok {
			recs = append(recs, StartRecord{JobID: s.JobID, Placement: slices.Clone(s.GPUs), CPUs: e.toldCPUs(s.JobID)})
		}
	}
	runs, errs, err := e.cfg.Store.MarkStartedAll(ctx, recs, now)
	if err != nil {
		e.cfg.Logger.Error("record the pass's starts", "starts", len(recs), "err", err)
		out := make(map[int64]startRecord, len(recs))
		for _, r := range recs {
			out[r.JobID] = startRecord{err: err}
		}
		return out
	}
	out := make(map[int64]startRecord, len(recs))
	for i, r := range recs {
		out[r.JobID] = startRecord{run: runs[i], err: errs[i]}
	}
	return out
}

// startable says whether the engine can start j on gpus: a job, on GPUs
// of connected machines; unknown is the machine of gpus that is not
// connected, if any.
func (e *Engine) startable(j Job, gpus []gpu.Ref) (ok bool, unknown string) {
	if j.ID == 0 || len(gpus) == 0 {
		return false, ""
	}
	for _, g := range gpus {
		if e.node(g.Node) == nil {
			return false, g.Node
		}
	}
	return true, ""
}

// afterStarts returns the snapshot's jobs as they stand once the pass's
// starts are made: the jobs that started hold their GPUs. Preempted jobs
// still hold theirs until they exit. Team figures are computed from it, so
// they count a job from the pass that starts it. It changes the jobs that
// started where they are: the snapshot is the pass's own (the forecast
// takes a copy), and at a long queue a copy of every job for a few starts
// was most of its cost.
func afterStarts(jobs []sched.Job, starts []sched.Start, runs map[int64]*run) []sched.Job {
	if len(starts) == 0 {
		return jobs
	}
	at := make(map[int64][]gpu.Ref, len(starts))
	for _, s := range starts {
		if runs[s.JobID] != nil { // it did start
			at[s.JobID] = s.GPUs
		}
	}
	for i := 0; i < len(jobs) && len(at) > 0; i++ {
		j := &jobs[i]
		if g, ok := at[j.ID]; ok {
			j.State, j.Placement = sched.Running, g
			delete(at, j.ID)
		}
	}
	return jobs
}

// recordQueues stores the queue moves of this pass before anything acts
// on them.
func (e *Engine) recordQueues(ctx context.Context, changes []sched.QueueChange) error {
	if len(changes) == 0 {
		return nil
	}
	states := make(map[int64]sched.QueueState, len(changes))
	for _, c := range changes {
		states[c.JobID] = c.State
		e.cfg.Logger.Info("job changed queue", "job", c.JobID, "from", c.From, "to", c.To, "reason", c.Reason)
	}
	return e.cfg.Store.SetQueueStates(ctx, states)
}

// recordReasons stores the wait reasons that changed since they were
// last stored, in one store call, and publishes every one (WaitReasons).
//
// At a long queue nearly every reason changes every pass only in its
// figures: a start moves every job behind it one place up ("41 jobs
// ahead" becomes "40"), an end changes the GPUs free. A reason whose words
// change (another cause, another machine named, "first in line") is
// stored at once; one whose figures alone changed is stored once it is
// reasonRefresh old, so that the store's reasons lag the engine's by
// figures only, and by at most that. Pages on the leader show the
// engine's own (WaitReasons), a follower the store's.
//
// Words too change at once for a whole queue when a team's figures cross
// its guarantee ("holds 256 of its 256 guaranteed GPUs" against "holds
// 259 GPUs, 3 beyond its guarantee of 256") or lending stops and starts
// again: under fair share with reservations past their deadline that
// happens nearly every pass, and stored at once it rewrote every reason
// of a 10,000-job queue every pass (issue 34's benchmark: 10,000 rows a
// pass, two seconds of a pass on PostgreSQL). So only the first
// reasonsAtOnce waits of each queue (Wait.Position), those nearest a
// start and all a follower's Queues page shows of a queue at first, have
// new words stored at once, and waits outside the scheduler's order (held
// by the gate: position 0), whose words seldom change; further back a
// reason is stored once it is reasonRefresh old whatever changed, and the
// store lags the engine by at most that there.
//
// A job's stored reason counts only while the job is among the waits of
// every call: one that was not among the last call's (it started, ended,
// was held or cancelled) has its reason stored again when it waits
// again, whatever the store says meanwhile. A pass that fails before
// this call changes nothing here: after a database outage the reasons
// stored before it still count, and the first pass after it does not
// write every reason of a long queue at once. The engine keeps the
// stored reasons of the last call's waits alone (reasonBook), so that
// those of jobs that no longer wait are gone with the next call.
func (e *Engine) recordReasons(ctx context.Context, waits []sched.Wait, now time.Time) error {
	changed := make(map[int64]string)
	book := &e.reasons
	var at cursor
	for _, w := range waits {
		if old, ok := book.find(w.JobID, &at); ok {
			// Further back than reasonsAtOnce a fresh reason stays
			// whatever changed, its text unread: at a long queue the
			// thousands of stored texts are as many cache misses a pass.
			fresh := now.Sub(old.at) < refreshAfter(w.JobID)
			if fresh && w.Position > e.reasonsAtOnce || old.text == w.Reason || fresh && sameWords(old.text, w.Reason) {
				book.keep(old)
				continue
			}
		}
		changed[w.JobID] = w.Reason
		book.store(w.JobID)
	}
	// Waits reads the list after the pass: the pass is done with it, and
	// the scheduler makes a new one each pass (sched.Decisions.Waits).
	e.shareMu.Lock()
	e.waitList, e.waits = waits, nil
	e.shareMu.Unlock()
	err := e.cfg.Store.SetReasons(ctx, changed)
	book.commit(changed, now, err == nil)
	return err
}

// reasonRefresh is the longest a stored wait reason lags the engine's when
// only its figures changed (recordReasons).
const reasonRefresh = 30 * time.Second

// reasonsAtOnce is how many waits, first in each queue, have a reason
// whose words changed stored at once (recordReasons): twice the first
// page of a queue on the Queues page (100). It was the first 1,000 waits
// of the pass's order, all queues together: at 10,000 queued under fair
// share with reservations 180 to 210 rows a pass against 100 at 10
// queued (BenchmarkEngineQueue), and a queue behind a long one got none.
const reasonsAtOnce = 200

// refreshAfter is how old job id's stored reason may get when only its
// figures changed: from half reasonRefresh to all of it, by job, so that
// the reasons a pass first stores together are stored again apart.
func refreshAfter(id int64) time.Duration {
	return reasonRefresh/2 + time.Duration(uint64(id)%1024)*(reasonRefresh/2)/1024
}

// sameWords reports whether a and b differ at most in their figures: the
// runs of digits in them.
func sameWords(a, b string) bool {
	// The common prefix needs no digit test, eight bytes at a time, back
	// to the start of the run of digits it ends in: the walk below would
	// reach that point in both strings at once.
	n, p := min(len(a), len(b)), 0
	for p+8 <= n && a[p:p+8] == b[p:p+8] {
		p += 8
	}
	for p < n && a[p] == b[p] {
		p++
	}
	for p > 0 && isDigit(a[p-1]) {
		p--
	}
	i, j := p, p
	for i < len(a) && j < len(b) {
		da, db := isDigit(a[i]), isDigit(b[j])
		switch {
		case da && db:
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
		case a[i] != b[j]:
			return false
		default:
			i++
			j++
		}
	}
	return i == len(a) && j == len(b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// Waits returns, by job, why each waiting job waits as of the last pass
// and its place in its queue (Wait.Position, 1-based in the scheduler's
// order: its reason's "N jobs ahead" is Position-1): what its page, the
// Queues page and the API show on the leader. The map is never changed
// once published. A pass publishes its waits as a list, and the first
// call after it makes the map: a pass at a long queue does not make one
// that nobody reads.
func (e *Engine) Waits() map[int64]sched.Wait {
	e.shareMu.Lock()
	defer e.shareMu.Unlock()
	if e.waits == nil && e.waitList != nil {
		e.waits = make(map[int64]sched.Wait, len(e.waitList))
		for _, w := range e.waitList {
			e.waits[w.JobID] = w
		}
	}
	return e.waits
}

// simMemory is a job's memory on a simulated GPU: its declared memory, or
// a size that varies from job to job, split after the Salus measurements
// into a persistent part and an ephemeral part freed every iteration. A
// session's GPU reads 0% utilization: there is no training loop to
// simulate, only a notebook or a shell waiting for its user.
func simMemory(j Job) gpu.SimMemory {
	total := j.GPUMemMiB
	if total <= 0 {
		total = (8 + (j.ID*7919)%48) * 1024
	}
	p := total * 2 / 5
	it := time.Duration(2+j.ID%4) * time.Second
	util := j.SimUtilPct
	if util == nil && j.Session != nil {
		util = new(float64)
	}
	if util != nil && *util < 5 {
		it = 0 // a job that hardly computes runs no iterations: its memory stays put
	}
	return gpu.SimMemory{PersistentMiB: p, EphemeralMiB: total - p, Iteration: it, UtilPct: util}
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// recheckTime turns a Decisions.Recheck (seconds, as seconds gives them)
// into a time on the engine's clock, rounded up to the nanosecond so that
// a pass then sees the threshold reached; zero for none.
func recheckTime(s float64) time.Time {
	if !(s > 0) || s >= math.MaxInt64/1e9 {
		return time.Time{}
	}
	ns := math.Ceil(s * 1e9)
	return time.Unix(0, int64(ns))
}

// placementNode is the machine a placement starts on; "" for none.
func placementNode(p []gpu.Ref) string {
	if len(p) == 0 {
		return ""
	}
	return p[0].Node
}

// gpuNames formats a placement as "node:index" per GPU.
func gpuNames(p []gpu.Ref) []string {
	out := make([]string, len(p))
	for i, g := range p {
		out[i] = g.String()
	}
	return out
}
