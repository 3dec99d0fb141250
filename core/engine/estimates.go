package engine

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/estimate"
	"github.com/gpuportal/gpuportal/core/sched"
)

// How often the run times estimates learn from are reread: at most every
// durationsMinAge after a job completes, and at least every durationsTTL.
const (
	durationsTTL    = 10 * time.Minute
	durationsMinAge = 5 * time.Second
)

// estimate predicts when each waiting job starts (see package estimate),
// keeps the predictions for the portal and records each job's first one,
// so that the portal can say how good they have been.
func (e *Engine) estimate(ctx context.Context, snap sched.Snapshot, d sched.Decisions, now time.Time) error {
	age := now.Sub(e.loadedAt)
	if e.loadedAt.IsZero() || age > durationsTTL || (e.completed && age > durationsMinAge) {
		ds, err := e.cfg.Store.CompletedDurations(ctx, 5000)
		if err != nil {
			return err
		}
		e.durations, e.loadedAt, e.completed = estimate.NewDurations(ds), now, false
	}
	if e.durations.Len() == 0 {
		return nil // nothing to learn run times from yet
	}
	total := 0
	for _, n := range snap.Nodes {
		if !n.Unschedulable {
			total += len(n.GPUs)
		}
	}
	preempted := make(map[int64]bool, len(d.Preempts))
	for _, p := range d.Preempts {
		preempted[p.JobID] = true
	}
	var running []estimate.Running
	gpus := make(map[int64]int, len(snap.Jobs))
	for _, j := range snap.Jobs {
		gpus[j.ID] = j.GPUs
		if j.State == sched.Running && !preempted[j.ID] {
			running = append(running, estimate.Running{GPUs: j.GPUs, ExecutedS: j.ExecutedS})
		}
	}
	for _, s := range d.Starts {
		running = append(running, estimate.Running{GPUs: gpus[s.JobID]})
	}
	waiting := make([]estimate.Waiting, 0, len(d.Waits))
	for _, w := range d.Waits {
		waiting = append(waiting, estimate.Waiting{ID: w.JobID, GPUs: gpus[w.JobID]})
	}
	nowS := seconds(now)
	starts := estimate.Starts(nowS, total, running, waiting, e.durations)
	est := make(map[int64]time.Time, len(starts))
	first := make(map[int64]time.Time)
	for id, at := range starts {
		t := now.Add(time.Duration((at - nowS) * float64(time.Second)))
		est[id] = t
		if !e.estimated[id] {
			first[id] = t
		}
	}
	e.estMu.Lock()
	e.estimates = est
	e.estMu.Unlock()
	if err := e.cfg.Store.SetFirstEstimates(ctx, first); err != nil {
		return err
	}
	for id := range first {
		e.estimated[id] = true
	}
	for _, s := range d.Starts {
		delete(e.estimated, s.JobID)
	}
	return nil
}

// EstimatedStart is when a waiting job is expected to start, if known.
func (e *Engine) EstimatedStart(id int64) (time.Time, bool) {
	e.estMu.Lock()
	defer e.estMu.Unlock()
	t, ok := e.estimates[id]
	return t, ok
}
