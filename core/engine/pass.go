package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// pass runs one scheduling pass: requeue jobs lost with their machine, ask
// the scheduler, apply its decisions.
func (e *Engine) pass(ctx context.Context) error {
	jobs, err := e.cfg.Store.UnfinishedEngineJobs(ctx)
	if err != nil {
		return err
	}
	now := e.cfg.Now()
	e.refreshNodeStates(ctx, now)
	e.checkHealth(ctx, now)
	e.stopUnwanted(ctx, jobs)
	jobs = e.requeueLost(ctx, jobs, now)
	jobs = e.carryOutCancels(ctx, jobs, now)
	e.learnProfiles(ctx, now)
	snap, byID := e.snapshot(jobs, now)
	if snap.Teams, err = e.teams(ctx, jobs, now); err != nil {
		return err
	}
	began := time.Now()
	d := e.cfg.Scheduler.Schedule(snap)
	reclaims := 0
	for _, p := range d.Preempts {
		if p.Reclaim {
			reclaims++
		}
	}
	e.stats.pass(time.Since(began), len(d.Preempts), reclaims, len(d.Starts))
	e.recordAllocations(ctx, snap, d, byID)
	if err := e.recordQueues(ctx, d.QueueChanges); err != nil {
		return err
	}
	for _, p := range d.Preempts {
		e.preempt(ctx, p)
	}
	for _, s := range d.Starts {
		e.start(ctx, byID[s.JobID], s.GPUs, now)
	}
	if err := e.estimate(ctx, snap, d, now); err != nil {
		return err
	}
	if err := e.recordShares(ctx, snap, d, now); err != nil {
		return err
	}
	return e.recordReasons(ctx, d.Waits)
}

// stopUnwanted stops runs that the store no longer records as running on
// their node: a reconnecting machine may report jobs that were requeued or
// cancelled while it was away.
func (e *Engine) stopUnwanted(ctx context.Context, jobs []Job) {
	wanted := make(map[int64]map[string]bool)
	for _, j := range jobs {
		if j.State != job.Running {
			continue
		}
		nodes := make(map[string]bool)
		for _, p := range parsePlacement(j.Placement) {
			nodes[p.Node] = true
		}
		wanted[j.ID] = nodes
	}
	for id, r := range e.runs {
		if r.stop != "" {
			continue
		}
		for name := range r.parts {
			if !wanted[id][name] {
				e.cfg.Logger.Warn("stopping a run the cluster no longer wants", "job", id, "node", name)
				r.stop, r.reason, r.orphan = job.Queued, "stopped: not wanted on "+name, true
				e.stopAll(ctx, id, r)
				break
			}
		}
	}
}

// requeueLost puts back in the queue the jobs recorded as running that no
// connected machine runs: their machine restarted without them, or has been
// gone for longer than LostAfter. It returns jobs as they are now.
func (e *Engine) requeueLost(ctx context.Context, jobs []Job, now time.Time) []Job {
	out := jobs[:0]
	for _, j := range jobs {
		if j.State != job.Running || e.runs[j.ID] != nil {
			out = append(out, j)
			continue
		}
		node := placementNode(j.Placement)
		var reason string
		if e.node(node) != nil {
			reason = fmt.Sprintf("requeued: %s no longer runs it", node)
		} else {
			since, ok := e.lostSince[node]
			if !ok {
				since = e.started
				e.lostSince[node] = since
			}
			if now.Sub(since) < e.cfg.LostAfter {
				out = append(out, j)
				continue
			}
			reason = fmt.Sprintf("requeued: node %s lost for %s", node, now.Sub(since).Round(time.Second))
		}
		if err := e.cfg.Store.MarkStopped(ctx, j.ID, job.Queued, nil, reason, now); err != nil {
			e.cfg.Logger.Error("requeue lost job", "job", j.ID, "err", err)
			out = append(out, j)
			continue
		}
		e.cfg.Logger.Warn("job requeued", "job", j.ID, "reason", reason)
		e.stats.add(func(s *Stats) { s.Requeues++ })
		j.State, j.Placement = job.Queued, nil
		out = append(out, j)
	}
	return out
}

// snapshot describes the cluster to the scheduler.
func (e *Engine) snapshot(jobs []Job, now time.Time) (sched.Snapshot, map[int64]Job) {
	snap := sched.Snapshot{Now: seconds(now)}
	for _, n := range e.Nodes() {
		cpus, mem := n.Resources()
		sn := sched.Node{Name: n.Name(), CPUs: cpus, MemMiB: mem, Unschedulable: e.unschedulable(n.Name())}
		for _, d := range n.Devices() {
			if e.gpuUnhealthy(n.Name(), d.Index) {
				continue // out of service: no new jobs
			}
			sn.GPUs = append(sn.GPUs, sched.GPU{Index: d.Index, MemMiB: d.MemMiB})
		}
		snap.Nodes = append(snap.Nodes, sn)
	}
	byID := make(map[int64]Job, len(jobs))
	gpuMiB := smallestGPU(snap.Nodes)
	for _, j := range jobs {
		if j.State.Waiting() && j.RetryAt != nil && j.RetryAt.After(now) {
			continue // waits out its retry backoff
		}
		byID[j.ID] = j
		sj := sched.Job{
			ID: j.ID, Team: j.Team, User: j.User, GPUs: j.GPUs, GPUMemMiB: j.GPUMemMiB,
			SubmitTime: seconds(j.SubmittedAt), ExecutedS: j.ExecutedS,
			AttainedService: j.AttainedService, DurationS: j.SimDuration,
			Model: j.Model, Queue: j.Queue,
		}
		shareable(&sj, j, gpuMiB)
		e.cpuProfile(&sj, j)
		if j.LastStartAt != nil {
			sj.LastStartTime = seconds(*j.LastStartAt)
		}
		if j.State == job.Running {
			sj.State = sched.Running
			sj.Placement = parsePlacement(j.Placement)
			if j.LastStartAt != nil {
				ran := now.Sub(*j.LastStartAt).Seconds()
				sj.ExecutedS += ran
				sj.AttainedService += ran * float64(j.GPUs)
			}
		}
		snap.Jobs = append(snap.Jobs, sj)
	}
	return snap, byID
}

func (e *Engine) preempt(ctx context.Context, p sched.Preempt) {
	r, ok := e.runs[p.JobID]
	if !ok || r.stop != "" {
		return
	}
	r.stop, r.reason = job.Preempted, p.Reason
	e.stopAll(ctx, p.JobID, r)
	e.cfg.Logger.Info("job preempted", "job", p.JobID, "reason", p.Reason)
}

// start records that j runs on gpus, then starts one part of it on each
// machine those GPUs span. If a part cannot start, the job fails and the
// parts already started are stopped.
func (e *Engine) start(ctx context.Context, j Job, gpus []sched.GPURef, now time.Time) {
	if j.ID == 0 || len(gpus) == 0 {
		return
	}
	var order []string
	perNode := make(map[string][]int)
	placement := make([]string, 0, len(gpus))
	for _, g := range gpus {
		if e.node(g.Node) == nil {
			e.cfg.Logger.Error("scheduler placed a job on an unknown node", "job", j.ID, "node", g.Node)
			return
		}
		if _, ok := perNode[g.Node]; !ok {
			order = append(order, g.Node)
		}
		perNode[g.Node] = append(perNode[g.Node], g.Index)
		placement = append(placement, g.Node+":"+strconv.Itoa(g.Index))
	}
	if err := e.cfg.Store.MarkStarted(ctx, j.ID, placement, now); err != nil {
		e.cfg.Logger.Error("record job start", "job", j.ID, "err", err)
		return
	}
	delete(e.reasons, j.ID)
	r := &run{parts: make(map[string]bool), started: now, failures: j.Failures, gpus: perNode}
	if j.Failures > 0 {
		r.lastCode = j.ExitCode
	}
	e.runs[j.ID] = r
	for _, name := range order {
		spec := agent.Spec{
			JobID: j.ID, Command: j.Command, GPUs: perNode[name],
			SimRemaining: time.Duration((j.SimDuration - j.ExecutedS) * float64(time.Second)),
			Memory:       simMemory(j),
		}
		shareSpec(&spec, j, e.smallestGPU())
		spec.Resources = e.resourcesFor(j.ID, name)
		if err := e.node(name).Start(ctx, spec); err != nil {
			e.cfg.Logger.Warn("job failed to start", "job", j.ID, "node", name, "err", err)
			// A machine that went away is not the job's fault: it waits again.
			code := -1
			r.stop, r.reason, r.code = job.Failed, err.Error(), &code
			if errors.Is(err, agent.ErrDisconnected) {
				r.stop, r.reason, r.code = job.Queued, "requeued: "+name+" disconnected while starting it", nil
			}
			if len(r.parts) == 0 {
				delete(e.runs, j.ID)
				if err := e.cfg.Store.MarkStopped(ctx, j.ID, r.stop, r.code, r.reason, now); err != nil {
					e.cfg.Logger.Error("record failed start", "job", j.ID, "err", err)
				}
				return
			}
			e.stopAll(ctx, j.ID, r)
			return
		}
		r.parts[name] = true
	}
	e.cfg.Logger.Info("job started", "job", j.ID, "gpus", placement)
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

// recordReasons stores the reasons that changed since the last pass.
func (e *Engine) recordReasons(ctx context.Context, waits []sched.Wait) error {
	changed := make(map[int64]string)
	for _, w := range waits {
		if e.reasons[w.JobID] != w.Reason {
			changed[w.JobID] = w.Reason
		}
	}
	if err := e.cfg.Store.SetReasons(ctx, changed); err != nil {
		return err
	}
	for id, r := range changed {
		e.reasons[id] = r
	}
	return nil
}

// simMemory is a job's memory on a simulated GPU: its declared memory, or
// a size that varies from job to job, split after the Salus measurements
// into a persistent part and an ephemeral part freed every iteration.
func simMemory(j Job) gpu.SimMemory {
	total := j.GPUMemMiB
	if total <= 0 {
		total = (8 + (j.ID*7919)%48) * 1024
	}
	p := total * 2 / 5
	return gpu.SimMemory{PersistentMiB: p, EphemeralMiB: total - p,
		Iteration: time.Duration(2+j.ID%4) * time.Second}
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func placementNode(p []string) string {
	if len(p) == 0 {
		return ""
	}
	node, _, _ := strings.Cut(p[0], ":")
	return node
}

func parsePlacement(p []string) []sched.GPURef {
	out := make([]sched.GPURef, 0, len(p))
	for _, s := range p {
		i := strings.LastIndexByte(s, ':')
		if i < 0 {
			continue
		}
		idx, err := strconv.Atoi(s[i+1:])
		if err != nil {
			continue
		}
		out = append(out, sched.GPURef{Node: s[:i], Index: idx})
	}
	return out
}
