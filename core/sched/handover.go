package sched

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// GPUs change hands only when the job that held them has left them: a
// preempted job may save a checkpoint for its grace period before it
// exits, and a job started on its GPUs meanwhile would run out of memory
// beside it. The caller (the live engine, the simulator) knows which GPUs
// a stopping job still holds; HandOver keeps back the starts that need
// them, so that both apply the scheduler's decisions the same way.

// HandOver splits starts into those that may be made now and waits for
// those that need a GPU in held (the GPUs of jobs asked to stop that have
// not yet exited, by the job that holds each). The kept-back jobs start
// in a later pass.
func HandOver(starts []Start, held map[gpu.Ref]int64) (now []Start, waits []Wait) {
	if len(held) == 0 {
		return starts, nil
	}
	for _, s := range starts {
		by, gpu, ok := heldGPU(s.GPUs, held)
		if !ok {
			now = append(now, s)
			continue
		}
		waits = append(waits, Wait{JobID: s.JobID, Cause: WaitCapacity,
			Reason: fmt.Sprintf("starts once job %d has released %s:%d: it was asked to stop and may save a checkpoint first (up to the grace period)", by, gpu.Node, gpu.Index)})
	}
	return now, waits
}

func heldGPU(gpus []gpu.Ref, held map[gpu.Ref]int64) (int64, gpu.Ref, bool) {
	for _, g := range gpus {
		if by, ok := held[g]; ok {
			return by, g, true
		}
	}
	return 0, gpu.Ref{}, false
}

// Promises are the starts HandOver kept back, by job: the GPUs the
// scheduler placed each job on, and the jobs whose runs held some of
// them. Until those have all left, the GPUs go to no other job (Hold);
// then the job starts on them as decided (Due), before the next pass
// decides anything. Without the first rule, the victims, leaving one at a
// time, took the GPUs back as they were freed; without the second, the
// next pass, with the victims and their preemptor all waiting, might
// rank a victim first (one that fits within its team's guarantee goes
// ahead of a preemptor that borrows): the victims started again where
// they had been, and were preempted again, without end. The live engine
// and the simulator keep their promises through this one type.
type Promises map[int64]Promise

// Promise is the kept-back start of one job.
type Promise struct {
	GPUs    []gpu.Ref
	Victims []int64 // the jobs whose runs held some of GPUs, ascending
}

// Keep records a promise for each start that HandOver kept back (waits),
// with held as given to HandOver.
func (ps Promises) Keep(starts []Start, waits []Wait, held map[gpu.Ref]int64) {
	for _, w := range waits {
		for _, st := range starts {
			if st.JobID != w.JobID {
				continue
			}
			p := Promise{GPUs: st.GPUs}
			for _, g := range st.GPUs {
				if by, ok := held[g]; ok && !slices.Contains(p.Victims, by) {
					p.Victims = append(p.Victims, by)
				}
			}
			slices.Sort(p.Victims)
			ps[w.JobID] = p
		}
	}
}

// Hold forgets the promises whose job no longer waits, and keeps back the
// starts of other jobs on the GPUs promised to a job whose victims have
// not all left (stopping tells of a job whether it still holds its GPUs).
// It returns the starts to make now and a wait for each one kept back.
func (ps Promises) Hold(starts []Start, waiting, stopping func(id int64) bool) (now []Start, kept []Wait) {
	to := make(map[gpu.Ref]int64)
	for _, id := range slices.Sorted(maps.Keys(ps)) {
		p := ps[id]
		if !waiting(id) {
			delete(ps, id)
			continue
		}
		if !slices.ContainsFunc(p.Victims, stopping) {
			continue // due: see Due
		}
		for _, g := range p.GPUs {
			to[g] = id
		}
	}
	if len(to) == 0 {
		return starts, nil
	}
	for _, s := range starts {
		var by int64
		var gpu gpu.Ref
		for _, g := range s.GPUs {
			if b, ok := to[g]; ok && b != s.JobID {
				by, gpu = b, g
				break
			}
		}
		if by == 0 {
			now = append(now, s)
			continue
		}
		kept = append(kept, Wait{JobID: s.JobID, Cause: WaitCapacity, Reason: fmt.Sprintf(
			"waits: %s:%d is kept for job %d, which preempted jobs to start there and starts once they have exited",
			gpu.Node, gpu.Index, by)})
	}
	return now, kept
}

// Due removes and returns, in job order, the promised starts whose
// victims have all left (stopping as for Hold). The caller makes each
// one whose job still waits and whose GPUs are all free, and lets the
// pass decide afresh for the others.
func (ps Promises) Due(stopping func(id int64) bool) []Start {
	if len(ps) == 0 {
		return nil // the simulator asks every pass
	}
	var due []Start
	for _, id := range slices.Sorted(maps.Keys(ps)) {
		if p := ps[id]; !slices.ContainsFunc(p.Victims, stopping) {
			due = append(due, Start{JobID: id, GPUs: p.GPUs})
			delete(ps, id)
		}
	}
	return due
}

// Present shows the scheduler each promised job that still waits in jobs
// as running on the GPUs promised to it, since now, and each leaving job
// without them: they are the promised job's once its victims have
// exited. So no other job is placed there, and the pass looks for no
// other victims for it; while it saw the job waiting, every pass of the
// victims' grace period preempted another job for the same start. A
// promised job that the pass preempts has its promise withdrawn by the
// caller (delete) and waits on. restore puts the jobs back as they were,
// for a caller that keeps them from pass to pass.
func (ps Promises) Present(jobs []Job, now float64) (restore func()) {
	if len(ps) == 0 {
		return func() {}
	}
	type was struct {
		i         int
		state     State
		placement []gpu.Ref
		gpus      int
		last      float64
	}
	var changed []was
	promised := make(map[gpu.Ref]bool)
	for i := range jobs {
		j := &jobs[i]
		if p, ok := ps[j.ID]; ok && j.State == Pending {
			changed = append(changed, was{i, j.State, j.Placement, j.GPUs, j.LastStartTime})
			j.State, j.Placement, j.LastStartTime = Running, p.GPUs, now
			for _, g := range p.GPUs {
				promised[g] = true
			}
		}
	}
	for i := range jobs {
		j := &jobs[i]
		if j.State != Leaving || !slices.ContainsFunc(j.Placement, func(g gpu.Ref) bool { return promised[g] }) {
			continue
		}
		changed = append(changed, was{i, j.State, j.Placement, j.GPUs, j.LastStartTime})
		var kept []gpu.Ref
		for _, g := range j.Placement {
			if !promised[g] {
				kept = append(kept, g)
			}
		}
		j.Placement, j.GPUs = kept, len(kept)
	}
	return func() {
		for _, w := range changed {
			j := &jobs[w.i]
			j.State, j.Placement, j.GPUs, j.LastStartTime = w.state, w.placement, w.gpus, w.last
		}
	}
}

// Waits are the waits of the promised jobs whose victims have not all
// left (stopping as for Hold), as HandOver words them, in job order:
// the pass sees them running (Present) and words none.
func (ps Promises) Waits(held map[gpu.Ref]int64, stopping func(id int64) bool) []Wait {
	var out []Wait
	for _, id := range slices.Sorted(maps.Keys(ps)) {
		p := ps[id]
		if !slices.ContainsFunc(p.Victims, stopping) {
			continue
		}
		_, w := HandOver([]Start{{JobID: id, GPUs: p.GPUs}}, held)
		out = append(out, w...)
	}
	return out
}
