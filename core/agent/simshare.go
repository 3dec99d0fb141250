package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/gate"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// defaultSimIteration is a shared simulated job's iteration when its
// memory model names none.
const defaultSimIteration = 2 * time.Second

// sharedSim runs a simulated job that opted in to sharing: like a
// training script that uses the gate, it asks for each iteration, runs
// it, and reports its ephemeral peak. It progresses only during its
// iterations, so jobs that take turns in one lane each take longer. On a
// simulated GPU its ephemeral memory is there only during its
// iterations.
func (a *Local) sharedSim(s job.Spec, log *os.File, stopped <-chan struct{}) (int, string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	sim, _ := a.cfg.Backend.(*gpu.Sim)
	iter := s.Memory.Iteration
	if iter <= 0 {
		iter = defaultSimIteration
	}
	start := time.Now()
	fmt.Fprintf(log, "%s simulated job %d started on GPUs %v, sharing them (P %d MiB, E %d MiB), %s of iterations to go\n",
		start.Format(time.RFC3339), s.JobID, s.GPUs, s.Memory.PersistentMiB, s.Memory.EphemeralMiB, s.SimRemaining.Round(time.Second))
	var logged time.Time
	left := s.SimRemaining
	for n := int64(1); left > 0; n++ {
		laneMiB, laneJobs, err := a.gate.Acquire(ctx, s.JobID, 0)
		if err != nil {
			return a.sharedSimEnd(log, stopped, err)
		}
		d := min(iter, left)
		began := time.Now()
		if sim != nil {
			sim.BeginIteration(s.JobID, began)
		}
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-stopped:
			timer.Stop()
		}
		if sim != nil {
			sim.EndIteration(s.JobID)
		}
		left -= time.Since(began)
		if err := a.gate.Release(s.JobID, s.Memory.EphemeralMiB); err != nil {
			return a.sharedSimEnd(log, stopped, err)
		}
		select {
		case <-stopped:
			return a.sharedSimEnd(log, stopped, context.Canceled)
		default:
		}
		if now := time.Now(); now.Sub(logged) >= simLogEvery {
			logged = now
			fmt.Fprintf(log, "%s iteration %d %s, %s elapsed\n",
				now.Format(time.RFC3339), n, laneText(laneMiB, laneJobs), now.Sub(start).Round(time.Second))
		}
	}
	fmt.Fprintf(log, "%s done\n", time.Now().Format(time.RFC3339))
	return 0, ""
}

// sharedSimEnd says how a shared simulated job ended early: stopped (by
// a request or because it outgrew its lane, which the gate has reported
// to stopForGate), or failed at the gate.
func (a *Local) sharedSimEnd(log *os.File, stopped <-chan struct{}, err error) (int, string) {
	var ex *gate.ExceededError
	select {
	case <-stopped:
		return a.simStopped(log)
	default:
	}
	if errors.As(err, &ex) {
		return -1, ex.Error()
	}
	fmt.Fprintf(log, "%s the gate failed: %v\n", time.Now().Format(time.RFC3339), err)
	return -1, "gate: " + err.Error()
}

// laneText says which lane an iteration ran in: a lane is one part of the
// GPU's memory, whose jobs take turns; the GPU's other lanes, and the
// jobs in them, are not counted (the job's page lists every job sharing
// the GPU).
func laneText(laneMiB int64, laneJobs int) string {
	if laneJobs <= 1 {
		return fmt.Sprintf("in its own lane of %d MiB (other jobs may use the GPU's other lanes)", laneMiB)
	}
	if laneJobs == 2 {
		return fmt.Sprintf("in a lane of %d MiB, taking turns with 1 other job there", laneMiB)
	}
	return fmt.Sprintf("in a lane of %d MiB, taking turns with %d other jobs there", laneMiB, laneJobs-1)
}
