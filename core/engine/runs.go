package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// A job runs once. Every start of a job is a run, numbered by the store
// before any machine is asked to start it (Store.MarkStarted). The engine
// knows each job's current run; every message from a machine names a run,
// and one about another run never changes the job:
//
//   - a machine that reports a run the cluster no longer wants (it was
//     away while the job was requeued and started again) has that run
//     stopped, and only that run: it becomes a stray, whose GPUs nobody
//     else gets until it has exited;
//   - a machine that comes back with the job's current run after the job
//     was requeued, when nothing else runs the job, keeps it (the job runs
//     again as that run: Store.MarkResumed);
//   - the exit of a run that is not the job's current one is acknowledged
//     and dropped;
//   - a run asked to stop (preempted, cancelled) holds its GPUs until its
//     processes have exited: a job the scheduler places on them starts in
//     a later pass (deferStarts);
//   - an exit is acknowledged to its agent only once the store has it
//     (job.Exit.Recorded); when the store fails, or the engine is fenced
//     (fence.go), the engine keeps the outcome and tries again every pass.

// FenceBound is how long after the server lets go of a machine (its
// heartbeat timeout passed, or the server started and has not heard it)
// the machine's jobs may be requeued: by then its agent, which has heard
// no server for the heartbeat timeout, has sent its runs SIGTERM and,
// after the grace period, SIGKILL (core/agent/fence.go and watchdog.go).
// The margin covers the agent's checks and clock steps.
func FenceBound(heartbeatTimeout, grace time.Duration) time.Duration {
	return heartbeatTimeout + grace + fenceMargin
}

const fenceMargin = 2 * time.Second

// run is a job's current run: one part per machine it spans.
type run struct {
	id    int64           // the run's number (job.RunRef.Run)
	parts map[string]bool // nodes whose part has not exited
	// stop, once set, is the state the job ends in when all parts exit.
	stop   job.State
	reason string
	code   *int
	// limitStop: its time limit stopped it, and the first part to exit
	// since adds to reason how it ended (SIGTERM or SIGKILL: endedHow).
	limitStop bool
	// adopted runs were reported by a machine that connected, not started
	// by this engine: the next pass checks them against the store.
	adopted bool
	// exited is set when a part ended on its own (not asked to stop);
	// together with the job's history it decides whether to retry.
	exited  bool
	started time.Time
	// ended is the job's service before this run and acc how the run
	// attains it (held.go), for the GPU-time it completes with
	// (Config.GPUTime); learn is false for a run the engine adopted
	// rather than started.
	ended    usage.Service
	acc      usage.Accrual
	learn    bool
	gpus     map[string][]int // the GPUs of each part, by node; none when adopted unknown (adopt.go)
	failures int              // earlier failed runs
	retries  int              // how many failures the job asked to have retried
	lastCode *int             // exit code of the last failed run
	// requeue is the larger estimate of a job that outgrew its lane.
	requeue *memest.Estimate
	// measured is a sharing job's estimate as the gate corrected it
	// (job.Exit.Measured), stored for its next run.
	measured *memest.Estimate
	// resumeSeen: what the run resumed from is recorded (resume.go).
	resumeSeen bool
	// stopAsked is when the run was asked to stop, for the handover time.
	stopAsked time.Time
	// stopKept is the stop the store keeps for the run (saveStop).
	stopKept job.State
	// lost are parts whose state is unknown, since when: their machine
	// disconnected, or did not answer the start. They count as running
	// (in parts) until their machine comes back without them, or it has
	// fenced them: LostAfter has passed (losePart, resolveLost).
	lost map[string]time.Time
	// partEnded is when the last of its parts that exited ended (their
	// machines' times): a lost part taken for gone ends the run no
	// earlier.
	partEnded time.Time
	// master and port are the first machine of a run on several machines
	// and the port reserved there for its rendezvous (gang.go); "" and 0
	// for a run on one machine as one process.
	master string
	port   int
}

// losePart marks r's part on node as lost: the run is asked to stop (a job
// on several machines cannot go on without one of them), and its outcome
// waits until every lost part is known gone.
func (e *Engine) losePart(ctx context.Context, id int64, r *run, node, why string) {
	if r.lost == nil {
		r.lost = make(map[string]time.Time)
	}
	if _, ok := r.lost[node]; !ok {
		r.lost[node] = e.cfg.Now()
	}
	if r.stop == "" {
		r.stop, r.reason, r.code = job.Queued, "requeued: "+why, nil
		e.stats.requeued(RequeueNodeLost)
	}
	e.cfg.Logger.Warn("a part of a run is lost: the run stops once it is known gone", "job", id, "run", r.id, "node", node, "why", why)
	e.stopAll(ctx, id, r)
}

// resolveLost ends lost parts whose machines have had the time to fence
// them, and records the runs that thereby ended.
func (e *Engine) resolveLost(ctx context.Context, now time.Time) {
	for _, id := range sortedRunIDs(e.runs) {
		r := e.runs[id]
		for name, since := range r.lost {
			if now.Sub(since) >= e.cfg.LostAfter {
				e.cfg.Logger.Info("a lost part of a run is taken for gone: its machine has fenced it", "job", id, "run", r.id, "node", name)
				e.partGone(ctx, id, r, name, now)
			}
		}
	}
}

// partGone ends r's lost part on node, and the run if it was its last:
// as the engine knows, when the part was lost, or when the last of the
// other parts ended if that was later; not now, when the engine gave up
// waiting for the machine.
func (e *Engine) partGone(ctx context.Context, id int64, r *run, node string, now time.Time) {
	at := now
	if since, ok := r.lost[node]; ok {
		at = since
	}
	if r.partEnded.After(at) {
		at = r.partEnded
	}
	delete(r.lost, node)
	delete(r.parts, node)
	e.endedWithoutExit(job.RunRef{Job: id, Run: r.id}, node, now)
	if len(r.parts) > 0 {
		r.partEnded = at
		return
	}
	ex := job.Exit{Node: node, JobID: id, Run: r.id, ExitCode: -1, Infra: true, At: at}
	e.tryRecord(ctx, &unrecorded{ex: ex, r: r, record: e.outcome(ex, r), since: now})
	e.noteHeld()
}

func sortedRunIDs(runs map[int64]*run) []int64 {
	ids := make([]int64, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return ids
}

// partRef names one part of a run: a run of a job on a machine (the
// strays, the runs ended without their exit).
type partRef struct {
	ref  job.RunRef
	node string
}

// unrecorded is a run's outcome the store could not take yet.
type unrecorded struct {
	ex     job.Exit
	r      *run
	record func(context.Context) error
	since  time.Time
	err    error // why the store last failed to take it
}

// handover is the service run r attained from its stop request to at:
// the time a job takes to save its work and exit. The queues do not count
// it (Store.MarkStopped), nor does the pass while the run leaves
// (schedJob): under tiresias-g a victim's index moves with its service,
// and with the handover counted it outranks the job that replaced it and
// preempts it back (docs/simulator.md, "Passes between events"). Zero for
// a run not asked to stop.
func (r *run) handover(at time.Time) usage.Service {
	if r.stopAsked.IsZero() || !at.After(r.stopAsked) {
		return usage.Service{}
	}
	all := usage.Current(r.ended, r.acc, &r.started, at)
	asked := usage.Current(r.ended, r.acc, &r.started, r.stopAsked)
	return usage.Service{ExecutedS: all.ExecutedS - asked.ExecutedS, GPUSeconds: all.GPUSeconds - asked.GPUSeconds}
}

// stopAll asks every part of r to stop.
func (e *Engine) stopAll(ctx context.Context, id int64, r *run) {
	if r.stopAsked.IsZero() {
		r.stopAsked = e.cfg.Now()
	}
	e.saveStop(ctx, id, r)
	for name := range r.parts {
		if n := e.node(name); n != nil {
			if err := n.Stop(ctx, job.RunRef{Job: id, Run: r.id}); err != nil {
				e.cfg.Logger.Error("stop job", "job", id, "run", r.id, "node", name, "err", err)
			}
		}
	}
}

// stray marks one part of a run the cluster does not want: its GPUs are
// kept from the scheduler until that part has exited, and the next pass
// asks its machine to stop it (not now: a machine that is connecting
// cannot take requests before it is welcomed).
func (e *Engine) stray(ref job.RunRef, node string, gpus []int, why string) {
	k := partRef{ref, node}
	if _, ok := e.strays[k]; !ok {
		e.cfg.Logger.Warn("stopping a run the cluster no longer wants", "job", ref.Job, "run", ref.Run, "node", node, "why", why)
		e.stats.add(func(s *Stats) { s.StrayRuns++ })
	}
	if gpus != nil {
		gpus = append([]int{}, gpus...)
	}
	e.strays[k] = gpus
	e.stopLater = append(e.stopLater, k)
}

// stopQueued asks machines to stop the runs queued by stray and adopt.
func (e *Engine) stopQueued(ctx context.Context) {
	queued := e.stopLater
	e.stopLater = nil
	for _, k := range queued {
		n := e.node(k.node)
		if n == nil {
			continue // a reconnect reports it again
		}
		if err := n.Stop(ctx, k.ref); err != nil {
			e.cfg.Logger.Error("stop a run", "job", k.ref.Job, "run", k.ref.Run, "node", k.node, "err", err)
		}
	}
}

// partGPUs returns the GPUs a run's part holds on node, as the engine
// started it or as the machine reported it.
func partGPUs(r *run, n Node, id int64) []int {
	if g := r.gpus[n.Name()]; g != nil {
		return g
	}
	if rep, ok := n.(RunGPUsReporter); ok {
		if g, ok := rep.RunGPUs(id); ok {
			return g
		}
	}
	return nil
}

// adopt takes in the runs a connecting machine reports: parts of current
// runs rejoin them, runs the engine knows to be stale become strays, and
// the others wait for the next pass to be checked against the store.
func (e *Engine) adopt(ctx context.Context, n Node) {
	reported := make(map[job.RunRef]bool)
	for _, ref := range n.Running() {
		reported[ref] = true
	}
	// Lost parts on this machine: back with it, or gone.
	for _, id := range sortedRunIDs(e.runs) {
		r := e.runs[id]
		if _, ok := r.lost[n.Name()]; !ok {
			continue
		}
		if reported[job.RunRef{Job: id, Run: r.id}] {
			delete(r.lost, n.Name()) // it rejoins below, and is asked to stop
			continue
		}
		e.partGone(ctx, id, r, n.Name(), e.cfg.Now())
	}
	for _, ref := range n.Running() {
		if gpus, ok := e.strays[partRef{ref, n.Name()}]; ok {
			e.stray(ref, n.Name(), gpus, "still running after it was asked to stop")
			continue
		}
		r := e.runs[ref.Job]
		if r != nil && r.id != ref.Run {
			e.stray(ref, n.Name(), partGPUs(&run{}, n, ref.Job), fmt.Sprintf("the job's current run is %d", r.id))
			continue
		}
		if r == nil {
			r = &run{id: ref.Run, parts: make(map[string]bool), adopted: true, started: e.cfg.Now()}
			e.runs[ref.Job] = r
		}
		r.parts[n.Name()] = true
		adoptGPUs(r, n, ref.Job)
		if r.stop != "" {
			// Asked to stop before its machine went away: ask again.
			e.stopLater = append(e.stopLater, partRef{ref, n.Name()})
		}
	}
}

// reconcile checks the engine's runs against the store at the start of a
// pass: parts of runs the store does not place where they run, and runs
// that are not their job's current run, become strays; an adopted run of a
// job that was requeued while its machine was away, and that nothing else
// runs, is resumed. It returns the jobs as they are now.
func (e *Engine) reconcile(ctx context.Context, jobs []Job, now time.Time) []Job {
	index := newPassJobs(jobs)
	for id := range e.handover {
		if i, ok := index.find(id); !ok || !jobs[i].State.Waiting() {
			delete(e.handover, id) // started or gone: nothing to measure
		}
	}
	for _, id := range sortedRunIDs(e.runs) {
		r := e.runs[id]
		if len(r.parts) == 0 || len(r.lost) > 0 {
			continue // ended, its outcome waiting for the store; or waiting for lost parts
		}
		i, known := index.find(id)
		var j Job
		if known {
			j = jobs[i]
		}
		stopReq, stopAsked := stopRequested(&j, r.id)
		switch {
		case known && j.State == job.Running && j.Run == r.id:
			nodes := make(map[string]bool)
			for _, p := range j.Placement {
				nodes[p.Node] = true
			}
			for _, name := range sortedParts(r) {
				if !nodes[name] {
					e.strayPart(id, r, name, "the job is not placed on "+name)
				}
			}
			if len(r.parts) == 0 {
				delete(e.runs, id)
			}
			if r.acc == (usage.Accrual{}) && j.LastStartAt != nil {
				// Adopted: what the store counts of the run so far, as
				// for a run this engine started (run.handover).
				r.started, r.acc = *j.LastStartAt, j.accrual()
				r.ended = usage.Service{ExecutedS: j.ExecutedS, GPUSeconds: j.AttainedService}
			}
			if r.adopted {
				r.failures, r.retries = j.Failures, j.Retries
				if j.Failures > 0 {
					r.lastCode = j.ExitCode
				}
			}
			if stopAsked && r.stop == "" {
				e.restoreStop(id, r, stopReq)
			}
			r.adopted = false
		case known && j.State.Waiting() && j.Run == r.id && r.adopted && r.stop == "" && j.CancelRequest == "" && !stopAsked:
			if placement, ok := e.resumable(j, r); ok {
				reason := fmt.Sprintf("resumed: run %d was still running on %s when its machine came back", r.id, strings.Join(sortedParts(r), ", "))
				from, err := e.cfg.Store.MarkResumed(ctx, job.RunRef{Job: id, Run: r.id}, placement, reason, now)
				if err == nil {
					e.cfg.Logger.Warn("job resumed on a machine that came back with it", "job", id, "run", r.id, "counted_from", from)
					jobs[i].State, jobs[i].Placement, jobs[i].LastStartAt = job.Running, placement, &from
					r.adopted, r.started, r.acc = false, from, usage.Whole(j.GPUs)
					r.ended = usage.Service{ExecutedS: j.ExecutedS, GPUSeconds: j.AttainedService}
					continue
				}
				e.cfg.Logger.Error("resume a run that came back", "job", id, "run", r.id, "err", err)
			}
			fallthrough
		default:
			why := "the job is no longer running"
			if known && j.Run != r.id {
				why = fmt.Sprintf("the job's current run is %d", j.Run)
			}
			for _, name := range sortedParts(r) {
				e.strayPart(id, r, name, why)
			}
			delete(e.runs, id)
		}
	}
	return jobs
}

// strayPart turns r's part on node into a stray.
func (e *Engine) strayPart(id int64, r *run, node, why string) {
	var gpus []int
	if n := e.node(node); n != nil {
		gpus = partGPUs(r, n, id)
	}
	delete(r.parts, node)
	e.stray(job.RunRef{Job: id, Run: r.id}, node, gpus, why)
}

// resumable returns the placement of an adopted run that can take its
// requeued job back: all of it runs on one machine that reported its GPUs.
func (e *Engine) resumable(j Job, r *run) ([]gpu.Ref, bool) {
	if len(r.parts) != 1 {
		return nil, false
	}
	var node string
	for name := range r.parts {
		node = name
	}
	n := e.node(node)
	if n == nil {
		return nil, false
	}
	gpus := partGPUs(r, n, j.ID)
	if len(gpus) != j.GPUs || j.GPUs == 0 {
		return nil, false
	}
	placement := make([]gpu.Ref, len(gpus))
	for i, g := range gpus {
		placement[i] = gpu.Ref{Node: node, Index: g}
	}
	return placement, true
}

func sortedParts(r *run) []string {
	out := make([]string, 0, len(r.parts))
	for name := range r.parts {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// strayGPU reports whether a stray run holds GPU index of node. A stray
// whose GPUs are unknown (its machine did not say) holds them all.
func (e *Engine) strayGPU(node string, index int) bool {
	for k, gpus := range e.strays {
		if k.node != node {
			continue
		}
		if gpus == nil {
			return true
		}
		for _, g := range gpus {
			if g == index {
				return true
			}
		}
	}
	return false
}

// deferStarts keeps back the starts that would take GPUs a run still
// holds while it stops (preempted, cancelled, requeued): the job starts
// once that run has exited (startPromised), on the GPUs promised to it
// meanwhile (sched.Promises). It keeps back too the starts of other jobs
// on GPUs so promised. It returns the starts to make now and a wait for
// each one kept back.
func (e *Engine) deferStarts(starts []sched.Start, preempts []sched.Preempt, byID *passJobs) ([]sched.Start, []sched.Wait) {
	for _, p := range preempts {
		if _, ok := e.promised[p.JobID]; ok && e.runs[p.JobID] == nil {
			// Seen running on GPUs promised to it (Promises.Present), it
			// has not started: it waits on, its promise withdrawn.
			delete(e.promised, p.JobID)
			e.cfg.Logger.Info("promised start withdrawn", "job", p.JobID, "reason", p.Reason)
		}
	}
	held := make(map[gpu.Ref]int64)
	hold := func(id int64) {
		for _, g := range byID.job(id).Placement {
			held[g] = id
		}
	}
	for id, r := range e.runs {
		if r.stop != "" {
			hold(id)
		}
	}
	for _, p := range preempts {
		hold(p.JobID)
	}
	waiting := func(id int64) bool {
		j, ok := byID.get(id)
		return ok && j.State.Waiting()
	}
	starts, kept := e.promised.Hold(starts, waiting, e.stopping)
	now, waits := sched.HandOver(starts, held)
	e.promised.Keep(starts, waits, held)
	for _, w := range waits {
		if _, ok := e.handover[w.JobID]; ok {
			continue
		}
		asked := e.cfg.Now() // preempted in this pass
		for _, st := range starts {
			if st.JobID != w.JobID {
				continue
			}
			for _, g := range st.GPUs {
				if r := e.runs[held[g]]; r != nil && !r.stopAsked.IsZero() {
					asked = r.stopAsked
				}
			}
		}
		e.handover[w.JobID] = asked
	}
	// The jobs kept back in earlier passes, which this one saw running on
	// the GPUs promised to them (Promises.Present), but those it preempted.
	for _, w := range e.promised.Waits(held, e.stopping) {
		if !slices.ContainsFunc(preempts, func(p sched.Preempt) bool { return p.JobID == w.JobID }) &&
			!slices.ContainsFunc(waits, func(k sched.Wait) bool { return k.JobID == w.JobID }) {
			kept = append(kept, w)
		}
	}
	return now, append(waits, kept...)
}

// stopping tells whether a run of job id has been asked to stop and has
// yet to exit.
func (e *Engine) stopping(id int64) bool {
	r := e.runs[id]
	return r != nil && r.stop != ""
}

// startPromised makes the starts kept back by a handover whose victims
// have all exited (sched.Promises): each job starts on the GPUs the
// scheduler placed it on, as decided in the pass that preempted for it,
// before this pass decides anything. A promise whose job no longer waits
// or whose GPUs are not all free is forgotten: the pass decides afresh.
// It returns jobs as they stand after the starts.
func (e *Engine) startPromised(ctx context.Context, jobs []Job, now time.Time) []Job {
	due := e.promised.Due(e.stopping)
	if len(due) == 0 {
		return jobs
	}
	at := newPassJobs(jobs)
	taken := make(map[gpu.Ref]bool)
	for i := range jobs {
		if j := &jobs[i]; j.State == job.Running {
			for _, g := range j.Placement {
				taken[g] = true
			}
		}
	}
	for _, st := range due {
		i, ok := at.find(st.JobID)
		if !ok || !jobs[i].State.Waiting() || jobs[i].CancelRequest != "" || e.runs[st.JobID] != nil ||
			jobs[i].RetryAt != nil && jobs[i].RetryAt.After(now) || !e.freeForPromise(st.GPUs, taken) {
			continue
		}
		e.start(ctx, jobs[i], st.GPUs, now, nil)
		r := e.runs[st.JobID]
		if r == nil {
			continue // it did not start: the pass decides afresh
		}
		for _, g := range st.GPUs {
			taken[g] = true
		}
		started := now
		jobs[i].State, jobs[i].Placement, jobs[i].Run, jobs[i].LastStartAt = job.Running, slices.Clone(st.GPUs), r.id, &started
	}
	return jobs
}

// freeForPromise tells whether every GPU of gpus can take a job now: its
// machine is connected and schedulable, the GPU in service, and no run
// holds it (taken, by the jobs' placements, or a stray).
func (e *Engine) freeForPromise(gpus []gpu.Ref, taken map[gpu.Ref]bool) bool {
	for _, g := range gpus {
		if taken[g] || e.node(g.Node) == nil || e.unschedulable(g.Node) || e.gpuUnhealthy(g.Node, g.Index) || e.strayGPU(g.Node, g.Index) {
			return false
		}
	}
	return len(gpus) > 0
}

// handleExit records the end of one part of a run. The job ends when its
// last part does; a part that fails stops the others. The exit of a run
// that is not the job's current one changes nothing.
func (e *Engine) handleExit(ctx context.Context, ex job.Exit) {
	if _, ok := e.strays[partRef{ex.Ref(), ex.Node}]; ok {
		delete(e.strays, partRef{ex.Ref(), ex.Node})
		e.cfg.Logger.Info("a stray run ended", "job", ex.JobID, "run", ex.Run, "node", ex.Node)
		e.lateExit(ctx, ex)
		recorded(ex)
		return
	}
	r := e.runs[ex.JobID]
	if r != nil && r.id == ex.Run && !r.parts[ex.Node] {
		for _, u := range e.unrecorded {
			if u.r == r {
				// Sent again before the store took it: acknowledged with it.
				prev := u.ex.Recorded
				u.ex.Recorded = func() {
					if prev != nil {
						prev()
					}
					recorded(ex)
				}
				return
			}
		}
	}
	if r == nil || r.id != ex.Run || !r.parts[ex.Node] {
		e.cfg.Logger.Warn("exit of a run that is not the job's current run there: ignored", "job", ex.JobID, "run", ex.Run, "node", ex.Node)
		e.lateExit(ctx, ex)
		recorded(ex)
		return
	}
	if e.holdAdoptedExit(ex, r) {
		return
	}
	delete(r.parts, ex.Node)
	delete(r.lost, ex.Node)
	if ex.At.After(r.partEnded) {
		r.partEnded = ex.At
	}
	if r.code == nil || (*r.code == 0 && ex.ExitCode != 0) {
		code := ex.ExitCode // the first failure's code is the job's
		r.code = &code
	}
	if r.limitStop && r.stop == job.TimedOut {
		r.limitStop = false
		r.reason += "; " + endedHow(ex)
	}
	if ex.Measured != nil {
		r.measured = ex.Measured
	}
	if !ex.Infra && e.requeueIfGPUFailed(ctx, ex.Node, ex.ExitCode, r, e.cfg.Now()) {
		e.stopAll(ctx, ex.JobID, r)
	}
	if r.stop == "" && ex.EndedAs.Final() {
		// Ended outside gpuportal: cancelled in the executor (scancel),
		// or its time limit there reached. Neither is retried.
		r.stop, r.reason = ex.EndedAs, ex.Err+" on "+ex.Node
		e.stopAll(ctx, ex.JobID, r)
	}
	if r.stop == "" && ex.Infra {
		r.stop, r.reason = job.Queued, "requeued: "+ex.Err+" on "+ex.Node
		e.stopAll(ctx, ex.JobID, r)
		e.stats.requeued(RequeueAgentError)
	}
	if r.stop == "" && ex.Requeue != nil {
		e.outgrewLane(ctx, ex, r)
	}
	if r.stop == "" && ex.ExitCode != 0 {
		r.exited = true
		r.stop, r.reason = job.Failed, fmt.Sprintf("exit code %d on %s", ex.ExitCode, ex.Node)
		if ex.Err != "" {
			r.reason = ex.Err + " on " + ex.Node
		}
		e.stopAll(ctx, ex.JobID, r)
	}
	if len(r.parts) > 0 {
		recorded(ex) // the run goes on elsewhere; nothing to store yet
		return
	}
	u := &unrecorded{ex: ex, r: r, record: e.outcome(ex, r), since: e.cfg.Now()}
	e.tryRecord(ctx, u)
	e.noteHeld()
}

// recorded tells the exit's agent that it may forget the exit.
func recorded(ex job.Exit) {
	if ex.Recorded != nil {
		ex.Recorded()
	}
}

// tryRecord stores a run's outcome. When the store fails, the outcome is
// kept (and the run with it, so that its GPUs stay taken and the job is
// not taken for lost) to be tried again next pass; its agent hears nothing
// until then, and sends the exit again if it reconnects meanwhile.
func (e *Engine) tryRecord(ctx context.Context, u *unrecorded) bool {
	var err error
	if e.mayRecord() {
		e.recordExitResume(ctx, u.ex)
		err = u.record(ctx)
	} else {
		// Fenced: held, unacknowledged, until the lock is held again.
		err = errFenced
	}
	if err != nil && !errors.Is(err, job.ErrConflict) {
		if len(e.unrecorded) == 0 || e.unrecorded[len(e.unrecorded)-1] != u {
			e.cfg.Logger.Error("record job exit: will try again", "job", u.ex.JobID, "run", u.ex.Run, "err", err)
		}
		for _, p := range e.unrecorded {
			if p == u {
				return false
			}
		}
		e.unrecorded = append(e.unrecorded, u)
		u.err = err
		e.stats.add(func(s *Stats) { s.UnrecordedExits = int64(len(e.unrecorded)) })
		return false
	}
	if err != nil {
		e.cfg.Logger.Warn("job exit not recorded: the job moved on", "job", u.ex.JobID, "run", u.ex.Run, "err", err)
	} else if !u.ex.At.IsZero() {
		lag := max(0, e.cfg.Now().Sub(u.ex.At)).Seconds()
		e.stats.add(func(s *Stats) { s.ExitLag.observe(lag) })
	}
	if e.runs[u.ex.JobID] == u.r {
		delete(e.runs, u.ex.JobID)
	}
	if err == nil {
		at := u.ex.At
		if at.IsZero() {
			at = e.cfg.Now()
		}
		e.placedAt(gpusOfRun(u.r), at)
	}
	recorded(u.ex)
	return true
}

// retryRecords tries again to store the outcomes the store refused.
func (e *Engine) retryRecords(ctx context.Context) {
	pending := e.unrecorded
	e.unrecorded = nil
	for _, u := range pending {
		if !e.tryRecord(ctx, u) {
			continue
		}
		e.cfg.Logger.Info("job exit recorded after the store came back", "job", u.ex.JobID, "run", u.ex.Run,
			"after", e.cfg.Now().Sub(u.since).Round(time.Millisecond))
	}
	e.stats.add(func(s *Stats) { s.UnrecordedExits = int64(len(e.unrecorded)) })
	e.noteHeld()
}

// outcome decides, once, how the job of run r goes on after its last part
// exited, and returns the store write that records it.
func (e *Engine) outcome(ex job.Exit, r *run) func(context.Context) error {
	ref := job.RunRef{Job: ex.JobID, Run: r.id}
	to, code := r.stop, r.code
	if r.requeue != nil && to == job.Queued {
		return func(ctx context.Context) error { return e.recordRequeue(ctx, ex, r) }
	}
	switch to {
	case "":
		to = job.Succeeded
	case job.Preempted, job.Queued:
		code = nil
	case job.Failed:
		if r.exited {
			if retry := e.retry(ex, r); retry != nil {
				return func(ctx context.Context) error {
					e.recordMeasured(ctx, ex.JobID, r)
					return retry(ctx)
				}
			}
		}
	}
	reason := r.reason
	return func(ctx context.Context) error {
		e.recordMeasured(ctx, ex.JobID, r)
		if err := e.cfg.Store.MarkStopped(ctx, ref, to, code, reason, r.handover(ex.At), ex.At); err != nil {
			return fmt.Errorf("record end of %s: %w", ref, err)
		}
		e.cfg.Logger.Info("job ended", "job", ex.JobID, "run", r.id, "state", to, "reason", reason)
		if to.Waiting() {
			e.waitFrom(ex.JobID, ex.At)
		}
		if to == job.Succeeded {
			e.completed = true
			if e.cfg.GPUTime != nil && r.learn {
				e.cfg.GPUTime.Completed(usage.Current(r.ended, r.acc, &r.started, ex.At).GPUSeconds)
			}
		}
		if !r.stopAsked.IsZero() {
			e.stats.released(ex.At.Sub(r.stopAsked))
		}
		return nil
	}
}
