package sim

import (
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// job is the simulator's record of one trace job. What the scheduler sees
// of it lives in the snapshot (Simulator.snap[pos]); this holds the rest.
type job struct {
	tj    *trace.Job
	order int // rank in arrival order
	pos   int // index in the active list and the snapshot; -1 once done
	team  int // index in simulator.teams, when there are teams
	// within is when the job began to wait while fitting within its
	// team's guarantee, or -1 (teams only).
	within float64

	running  bool
	run      int     // runs so far; a completion event carries the run it ends
	runIdx   int     // index in the running list while running
	runStart float64 // when the current run began
	gpus     []sched.GPURef

	// At runStart, or now when not running:
	executed float64 // seconds run, restores included (ExecutedS)
	service  float64 // GPU-seconds held (AttainedService)
	progress float64 // seconds of useful work done
	owed     float64 // restore time still to run before work resumes

	preempts int
	finish   float64
	done     bool
}

// remaining is the run time the job needs from runStart to finish.
func (j *job) remaining() float64 {
	return j.owed + max(0, j.tj.Duration-j.progress)
}

// account adds a run of length ran (ending now) to the job's totals.
func (j *job) account(ran float64) {
	paid := min(j.owed, ran)
	j.owed -= paid
	j.progress += ran - paid
	j.executed += ran
	j.service += float64(j.tj.GPUs) * ran
}
