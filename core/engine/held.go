package engine

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// A job attains service by the GPUs it holds, a shared GPU counted by the
// share of it that usage.Shares gives the job among the jobs on it (issue
// 36): the same share the teams' GPU counts and accounting count. That
// share changes as jobs start and end beside it, so the store keeps, for
// the run in progress, what it attained up to its last change and what it
// holds since (usage.Accrual), and each pass records the changes before
// the scheduler reads the attained service (reheld).

// Held is a change of the GPUs a running job holds: run Ref holds GPUs
// GPUs from At on.
type Held struct {
	Ref  job.RunRef
	GPUs float64
	At   time.Time
}

// accrual is how j's run in progress attains service; the zero Accrual
// (a store that records none) holds its GPUs whole.
func (j *Job) accrual() usage.Accrual {
	if j.Accrual == (usage.Accrual{}) {
		return usage.Whole(j.GPUs)
	}
	return j.Accrual
}

// heldEps is how far a job's held GPUs may move before the change is
// recorded: sums of shares differ in the last bits.
const heldEps = 1e-9

// reheld records the changes of the GPUs the running jobs of jobs hold
// since the last pass and returns jobs with their accruals brought up to
// date. A change counts from the last start or end on the job's GPUs that
// this engine recorded (e.placed), which is when the jobs on the GPU
// changed: so a job's attained service is the share of its GPUs it held
// over time, as accounting counts it from the runs. Where the engine
// recorded none (it has just begun leading), the change counts from now.
// If the store fails, the jobs keep their accruals and the next pass
// tries again.
func (e *Engine) reheld(ctx context.Context, jobs []Job, now time.Time) []Job {
	var runs []usage.Run
	shared := false
	for i := range jobs {
		j := &jobs[i]
		if j.State != job.Running || len(j.Placement) == 0 {
			continue
		}
		runs = append(runs, usageRun(j))
		shared = shared || j.Sharing || math.Abs(j.accrual().Held-float64(j.GPUs)) > heldEps
	}
	if !shared {
		return jobs // every job holds its GPUs whole, as its accrual says
	}
	fig := usage.Of(runs, nil)
	var changes []Held
	var idx []int
	for i := range jobs {
		j := &jobs[i]
		if j.State != job.Running || len(j.Placement) == 0 || j.LastStartAt == nil {
			continue
		}
		h := fig.Held(j.ID)
		if math.Abs(h-j.accrual().Held) <= heldEps {
			continue
		}
		at := now
		if c, ok := e.lastPlaced(j.Placement); ok && c.Before(now) {
			at = c
		}
		if at.Before(*j.LastStartAt) {
			at = *j.LastStartAt
		}
		changes = append(changes, Held{Ref: job.RunRef{Job: j.ID, Run: j.Run}, GPUs: h, At: at})
		idx = append(idx, i)
	}
	if len(changes) == 0 {
		return jobs
	}
	if err := e.cfg.Store.SetHeld(ctx, changes); err != nil {
		e.cfg.Logger.Error("record the GPUs running jobs hold", "jobs", len(changes), "err", err)
		return jobs
	}
	for k, i := range idx {
		j, c := &jobs[i], changes[k]
		j.Accrual = j.accrual().Reheld(c.At.Sub(*j.LastStartAt).Seconds(), c.GPUs)
		if r := e.runs[j.ID]; r != nil && r.id == j.Run {
			r.acc = j.Accrual
		}
	}
	return jobs
}

// heldFromStart records, as the pass's starts are made, the share of its
// GPUs each job that started holds, and the changed shares of the jobs
// already on those GPUs: so a sharing run that ends before the next pass
// has attained its share, not its GPUs whole. jobs are the pass's jobs
// as they were before the starts; starts, those the scheduler decided
// (the ones that did not start are left out).
func (e *Engine) heldFromStart(ctx context.Context, jobs []Job, starts []sched.Start, byID *passJobs, now time.Time) {
	if !slices.ContainsFunc(starts, func(s sched.Start) bool {
		i, ok := byID.find(s.JobID)
		return ok && jobs[i].Sharing
	}) {
		// A job that does not share takes its GPUs whole and alone:
		// nobody's share changes (at a long queue, no walk of the jobs).
		return
	}
	at := make(map[int64]sched.Start, len(starts))
	sharing := false
	for _, s := range starts {
		at[s.JobID] = s
	}
	var after []Job
	for i := range jobs {
		j := &jobs[i] // left as it is: the started jobs change in a copy
		s, ok := at[j.ID]
		r := e.runs[j.ID]
		switch {
		case ok && r != nil && r.id != j.Run:
			started, c := now, *j
			c.State, c.Placement, c.Run, c.LastStartAt, c.Accrual = job.Running, slices.Clone(s.GPUs), r.id, &started, usage.Accrual{}
			sharing = sharing || c.Sharing
			after = append(after, c)
			continue
		case j.State != job.Running:
			continue
		}
		after = append(after, *j)
	}
	if sharing {
		e.reheld(ctx, after, now)
	}
}

// placedAt records that the jobs on gpus changed at t: a run started or
// ended there.
func (e *Engine) placedAt(gpus []gpu.Ref, t time.Time) {
	for _, g := range gpus {
		if t.After(e.placed[g]) {
			e.placed[g] = t
		}
	}
}

// lastPlaced is the last change of the jobs on any of gpus that this
// engine recorded; false when none.
func (e *Engine) lastPlaced(gpus []gpu.Ref) (time.Time, bool) {
	var last time.Time
	for _, g := range gpus {
		if t := e.placed[g]; t.After(last) {
			last = t
		}
	}
	return last, !last.IsZero()
}

// gpusOfRun are the GPUs of run r, by node.
func gpusOfRun(r *run) []gpu.Ref {
	var out []gpu.Ref
	for node, idx := range r.gpus {
		for _, i := range idx {
			out = append(out, gpu.Ref{Node: node, Index: i})
		}
	}
	return out
}
