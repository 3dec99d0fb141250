package engine

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// Gates keep waiting jobs from the scheduler before its snapshot, for
// reasons of the job's own making rather than the cluster's: a job that
// waits for others (job.Dependency), a task of an array that runs as
// many tasks as it allows (Job.ArrayLimit). The scheduler never sees them,
// and their reason says what they wait for. A job whose dependency can
// no longer be satisfied is cancelled, and a waiting job whose time is
// used up ends timed out.

// gate ends the waiting jobs that can never run, and keeps from the
// scheduler those that must wait. It returns the jobs the scheduler sees,
// in jobs' array (a long queue is not copied every pass), and a wait for
// each job kept back.
func (e *Engine) gate(ctx context.Context, jobs []Job, now time.Time) ([]Job, []sched.Wait) {
	running := make(map[int64]int) // tasks running per array
	for i := range jobs {
		if j := &jobs[i]; j.Array != nil && j.State == job.Running {
			running[j.Array.ID]++
		}
	}
	// out fills jobs' array from its start (keep): it never passes the
	// job the loop reads, and the tasks kept aside are copies.
	out := jobs[:0]
	var waits []sched.Wait
	var tasks []Job // waiting tasks of limited arrays, for the array gate
	for i := range jobs {
		j := &jobs[i]
		if !j.State.Waiting() || j.CancelRequest != "" {
			out = keep(out, jobs, i)
			continue
		}
		if end, to, why := endsWaiting(j); end {
			if err := e.cfg.Store.EndWaiting(ctx, j.ID, to, why, now); err != nil {
				e.cfg.Logger.Error("end a waiting job", "job", j.ID, "state", to, "err", err)
				out = keep(out, jobs, i)
				continue
			}
			e.cfg.Logger.Info("waiting job ended", "job", j.ID, "state", to, "reason", why)
			continue
		}
		if why := depWait(j); why != "" {
			waits = append(waits, sched.Wait{JobID: j.ID, Reason: why})
			continue
		}
		if j.Array != nil && j.ArrayLimit > 0 {
			tasks = append(tasks, *j)
			continue
		}
		out = keep(out, jobs, i)
	}
	sort.SliceStable(tasks, func(a, b int) bool {
		if tasks[a].Array.ID != tasks[b].Array.ID {
			return tasks[a].Array.ID < tasks[b].Array.ID
		}
		return tasks[a].Array.Index < tasks[b].Array.Index
	})
	for _, j := range tasks {
		id := j.Array.ID
		if j.RetryAt != nil && j.RetryAt.After(now) {
			out = append(out, j) // waits out its retry backoff: no place taken
			continue
		}
		if running[id] < j.ArrayLimit {
			running[id]++ // a place the scheduler may fill this pass
			out = append(out, j)
			continue
		}
		waits = append(waits, sched.Wait{JobID: j.ID, Reason: fmt.Sprintf(
			"waiting for a place in array %d: at most %d of its tasks run at once (%%%d)", id, j.ArrayLimit, j.ArrayLimit)})
	}
	// The store gives the jobs by ID: only array tasks let through above
	// come out of order, and a pass without them sorts nothing.
	byID := func(a, b int) bool { return out[a].ID < out[b].ID }
	if !sort.SliceIsSorted(out, byID) {
		sort.Slice(out, byID)
	}
	return out, waits
}

// endsWaiting says whether waiting job j can never run: its time is used
// up, or a job it depends on ended the wrong way (or is unknown); to is
// the state it ends in and why the reason.
func endsWaiting(j *Job) (end bool, to job.State, why string) {
	if j.TimeLimit > 0 && job.TimeLeft(j.TimeLimit, executed(*j, time.Time{})) <= 0 {
		return true, job.TimedOut, fmt.Sprintf("time limit %s reached: its time is used up", job.FormatTimeLimit(j.TimeLimit))
	}
	for _, d := range j.Deps {
		if d.State == "" {
			return true, job.Cancelled, fmt.Sprintf("dependency never satisfied: job %d does not exist", d.JobID)
		}
		if _, cancel := d.Check(d.State); cancel != "" {
			return true, job.Cancelled, cancel
		}
	}
	return false, "", ""
}

// depWait is why j waits for the jobs it depends on, "" when it does not.
func depWait(j *Job) string {
	for _, d := range j.Deps {
		if wait, _ := d.Check(d.State); wait != "" {
			return wait
		}
	}
	return ""
}
