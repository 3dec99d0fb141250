package sim

import (
	"math"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/core/usage"
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
	stopping bool        // preempted, it runs on until its handover ends (handover.go)
	done     bool        // finished
	reserved bool        // the job held a reservation in some pass
	class    sched.Class // from the trace's class column
	// waitsLane: under Salus sharing, the job waits for its lane's
	// turn (share.go). The flags sit together: a job record is smaller.
	waitsLane bool
	run       int     // runs so far; a completion event carries the run it ends
	runIdx    int     // index in the running list while running
	runStart  float64 // when the current run began
	gpus      []gpu.Ref

	// At runStart, or now when not running:
	executed float64 // seconds run, restores included (ExecutedS)
	service  float64 // GPU-seconds held (AttainedService)
	// acc is how the run attains service since runStart: a shared GPU
	// by the job's share of it (share.go), as the portal counts it.
	acc      usage.Accrual
	progress float64 // seconds of useful work done
	owed     float64 // restore time still to run before work resumes

	preempts int
	finish   float64

	// cpu is the job's CPU modelling (cpualloc.go), nil without it.
	cpu *jobCPU

	// Salus sharing (share.go): the compute the job asks of its GPU
	// (gpu_milli/1,000) and its speed from sharing it (0 means 1; see
	// waitsLane).
	demand, shareRate float64
}

// jobCPU is a job's CPU modelling (cpualloc.go): its profile, its
// allocation on each of its nodes while running, and its speed (0 means
// 1). It lives apart from the job: most replays model no CPUs, and the
// job records are most of what a replay's memory is made of (every page
// of it is faulted in once: docs/simulator.md, "Sixth round").
type jobCPU struct {
	profile    synergy.Profile
	profileSrc synergy.Source
	alloc      []sched.Allocation
	speed      float64
}

// remaining is the run time the job needs from runStart to finish.
func (j *job) remaining() float64 {
	speed := j.rate() * j.shareSpeed()
	if speed <= 0 {
		return math.Inf(1) // waits for its lane's turn (share.go)
	}
	return j.owed + max(0, j.tj.Duration-j.progress)/speed
}

// account adds a run of length ran (ending now) to the job's totals.
func (j *job) account(ran float64) {
	paid := min(j.owed, ran)
	j.owed -= paid
	j.progress += (ran - paid) * j.rate() * j.shareSpeed()
	sv := usage.Service{ExecutedS: j.executed, GPUSeconds: j.service}.Ran(ran, j.acc)
	j.executed, j.service = sv.ExecutedS, sv.GPUSeconds
	j.acc = usage.Accrual{Held: j.acc.Held} // the run goes on from now at what it holds
}
