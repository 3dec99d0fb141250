package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/sched"
)

// Salus sharing in the engine (docs/salus.md). A job that opted in to
// sharing, or asked for a fraction of a GPU, goes to the scheduler with
// its padded memory estimate (sched.Job.Sharing), which may co-locate it
// on a GPU where the safety condition holds. It starts with
// job.Spec.Sharing, so that the agent's gate admits it to a lane. When
// the gate stops it because it outgrew its lane, it goes back to the
// queue with the larger estimate the agent measured, and the run does not
// count as a failure.

// estimateOf is a sharing job's unpadded memory estimate on a GPU of
// gpuMiB: the one stored with it; else, for a fraction of a GPU, that
// fraction of the GPU; else its declared total; else a simulated job's
// memory model. The fraction and the total are split as memest splits a
// declared total. ok is false when nothing is known.
func estimateOf(j Job, gpuMiB int64) (est memest.Estimate, ok bool) {
	if j.Memory.PersistentMiB > 0 || j.Memory.EphemeralMiB > 0 {
		return j.Memory, true
	}
	total := j.GPUMemMiB
	if j.GPUFraction > 0 && j.GPUFraction < 1 && gpuMiB > 0 {
		total = int64(math.Floor(j.GPUFraction * float64(gpuMiB)))
	}
	if total > 0 {
		e, err := memest.For(memest.Request{TotalMiB: total, Model: j.Model})
		return e, err == nil
	}
	if len(j.Command) == 0 {
		m := simMemory(j)
		return memest.Estimate{PersistentMiB: m.PersistentMiB, EphemeralMiB: m.EphemeralMiB, Source: memest.Declared}, true
	}
	return memest.Estimate{}, false
}

// shares reports whether j runs shared: it opted in and asks for one GPU.
func shares(j Job) bool { return j.Sharing && j.GPUs == 1 }

// shareable marks sj as a sharing job for the scheduler, with its
// estimate padded as the agent's lanes pad it. gpuMiB is the smallest GPU
// of the cluster, what a fraction of a GPU is taken of. A sharing job
// whose memory nobody knows runs unshared.
func shareable(sj *sched.Job, j *Job, gpuMiB int64) {
	if !j.Sharing || j.GPUs != 1 { // shares
		return
	}
	est, ok := estimateOf(*j, gpuMiB)
	if !ok {
		return
	}
	p := memest.Padding{}.Apply(est)
	sj.Sharing, sj.MemPersistentMiB, sj.MemEphemeralMiB = true, p.PersistentMiB, p.EphemeralMiB
	if j.GPUFraction > 0 && j.GPUFraction < 1 {
		sj.GPUFraction = j.GPUFraction
	}
	if sj.GPUMemMiB == 0 {
		sj.GPUMemMiB = p.TotalMiB()
	}
}

// recordMeasured stores the estimate the gate corrected during a sharing
// job's run (job.Exit.Measured), so that the job's next run, after a
// preemption, a requeue or a retry, starts from it rather than from the
// estimate it was submitted with. A run that outgrew its lane stores its
// requeue estimate instead (recordRequeue).
func (e *Engine) recordMeasured(ctx context.Context, id int64, r *run) {
	if r.measured == nil {
		return
	}
	est := *r.measured
	if est.Source == "" {
		est.Source = memest.Measured
	}
	if err := e.cfg.Store.SetMeasuredMemory(ctx, id, est); err != nil {
		e.cfg.Logger.Error("record measured memory", "job", id, "err", err)
	}
}

// smallestGPU is the memory of the smallest schedulable GPU, 0 with
// none: nodes that take no new jobs (lost, draining, cordoned) and GPUs of
// unknown memory do not count. The caller leaves GPUs out of service out
// of nodes.
func smallestGPU(nodes []sched.Node) int64 {
	var least int64
	for _, n := range nodes {
		if n.Unschedulable {
			continue
		}
		for _, g := range n.GPUs {
			if g.MemMiB > 0 && (least == 0 || g.MemMiB < least) {
				least = g.MemMiB
			}
		}
	}
	return least
}

// shareSpec opts a sharing job's run in to the agent's gate with its
// unpadded estimate, the one the scheduler was given: gpuMiB is the
// cluster's smallest GPU, what a fraction of a GPU is taken of. A simulated job's memory model takes the estimate,
// so that the simulated GPU shows what the lanes hold.
func shareSpec(spec *job.Spec, j Job, gpuMiB int64) {
	if !shares(j) || len(spec.GPUs) != 1 {
		return
	}
	est, ok := estimateOf(j, gpuMiB)
	if !ok {
		return
	}
	spec.Sharing = &job.Sharing{Memory: est}
	if len(j.Command) == 0 {
		spec.Memory.PersistentMiB, spec.Memory.EphemeralMiB = est.PersistentMiB, est.EphemeralMiB
		spec.Sharing.DurationS = max(0, j.SimDuration-j.ExecutedS)
	}
}

// outgrewLane handles the exit of a run the gate stopped because the job
// outgrew its lane: the job waits again with the larger estimate.
func (e *Engine) outgrewLane(ctx context.Context, ex job.Exit, r *run) {
	est := *ex.Requeue
	if est.Source == "" {
		est.Source = memest.Measured
	}
	r.stop, r.requeue = job.Queued, &est
	r.reason = fmt.Sprintf("outgrew its lane on %s", ex.Node)
	e.stopAll(ctx, ex.JobID, r)
	e.stats.requeued(RequeueOutgrewLane)
}

// recordRequeue stores the requeue of a job that outgrew its lane. The
// store decides it by job.Requeue.Outcome, against the estimate the run
// started from and the requeues without progress before it.
func (e *Engine) recordRequeue(ctx context.Context, ex job.Exit, r *run) error {
	ref := job.RunRef{Job: ex.JobID, Run: r.id}
	rq := job.Requeue{Estimate: *r.requeue, Node: ex.Node, At: ex.At, Backoff: e.cfg.RetryBackoff}
	out, err := e.cfg.Store.MarkRequeued(ctx, ref, rq)
	if err != nil {
		return fmt.Errorf("record requeue of %s: %w", ref, err)
	}
	e.waitFrom(ex.JobID, ex.At)
	switch {
	case out.Held:
		e.cfg.Logger.Warn("job held: requeued without progress too often", "job", ex.JobID, "reason", out.Reason)
	case out.Stalls > 0:
		e.cfg.Logger.Warn("job outgrew its lane without progress", "job", ex.JobID, "stalls", out.Stalls, "retry_at", out.RetryAt, "reason", out.Reason)
	default:
		e.cfg.Logger.Info("job outgrew its lane", "job", ex.JobID, "reason", out.Reason)
	}
	return nil
}

// smallestGPU is the memory of the smallest schedulable GPU of the
// connected machines, as the pass's snapshot has it: GPUs out of service
// and nodes that take no new jobs do not count.
func (e *Engine) smallestGPU() int64 {
	var nodes []sched.Node
	for _, n := range e.Nodes() {
		sn := sched.Node{Name: n.Name(), Unschedulable: e.unschedulable(n.Name())}
		for _, d := range n.Devices() {
			if e.gpuUnhealthy(n.Name(), d.Index) {
				continue
			}
			sn.GPUs = append(sn.GPUs, sched.GPU{Index: d.Index, MemMiB: d.MemMiB})
		}
		nodes = append(nodes, sn)
	}
	return smallestGPU(nodes)
}
