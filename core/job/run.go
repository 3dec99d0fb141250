package job

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/memest"
)

// What the engine and a machine say to each other about runs: the engine
// starts a run with a Spec and learns how it ended from an Exit, whether
// the machine's agent runs in process (core/agent) or on another machine
// (core/agent/hub, protocol in core/agent/wire).

// Spec is what a machine needs to start one run of a job.
type Spec struct {
	JobID int64
	// Run numbers this start of the job (RunRef); the Exit names it.
	Run     int64
	Command []string // argv; empty for a simulated job
	// SimRemaining is how long a simulated job still has to run.
	SimRemaining time.Duration
	// Memory is the job's GPU memory on a simulated GPU.
	Memory gpu.SimMemory
	GPUs   []int // indices of this machine's GPUs
	// Sharing opts a job in to sharing its GPUs an iteration at a time
	// through the agent's gate; nil: not shared. A simulated job iterates
	// through the gate in process.
	Sharing *Sharing
	// Resources are the CPUs and memory allocated on this machine; nil:
	// not limited.
	Resources *Resources
	// Env are the job's own variables, "NAME=VALUE", names checked by
	// CheckEnvName: the machine adds them to the job's minimal
	// environment, before its GPUPORTAL_* variables.
	Env []string
	// Dir is the folder the job starts in; "": its job folder.
	Dir string
	// Array names the task of an array this job is (GPUPORTAL_ARRAY_*);
	// nil: not a task.
	Array *ArrayTask
	// TimeLeft is what remains of the job's time limit as the run starts;
	// 0: no limit. The engine stops the run at its limit; the machine
	// stops it itself a margin later (BackstopMargin), should the
	// engine not (it is away), and reports it TimedOut.
	TimeLeft time.Duration
	// Account is the Unix account of the job's owner: an agent that runs
	// jobs as their owners (agent --run-as owner) runs the job as this
	// account, looked up on its machine. Empty when the server did not
	// say; the others ignore it.
	Account string
	// Image, when set, is the container image the command runs in (agent
	// --container-runtime); empty: the command runs on the machine.
	Image string
	// Session makes the run an interactive session (session.go); nil: a
	// batch run.
	Session *Session
	// Name is the job's name (SLURM_JOB_NAME).
	Name string `json:",omitempty"`
	// Team is the job's team (the Kubernetes executor labels its pods
	// with it).
	Team string `json:",omitempty"`
	// Gang is the rendezvous of a run on several machines, or of one
	// that starts a process per GPU (gang.go); nil: one process on one
	// machine.
	Gang *Gang `json:",omitempty"`
	// Checkpoint is the server's copy of this part's checkpoint folder
	// (checkpoint.go): the machine restores it before the run starts when
	// its own folder is older. Nil: the server keeps none.
	Checkpoint *CheckpointCopy `json:",omitempty"`
}

// BackstopMargin is how long after a run's time is up (Spec.TimeLeft) its
// machine stops it, should the engine not have: the engine, which checks
// every pass, always acts first while it is there.
const BackstopMargin = 10 * time.Second

// Sharing opts a command job in to Salus sharing: its GPUs' lanes are
// shared in time with other jobs that opted in, one iteration at a time,
// through the agent's gate (core/agent/gate). The job asks the gate before
// each iteration and reports after it; static/clients/gpuportal_gate.py
// does so for Python.
type Sharing struct {
	// Memory is the job's estimate on each of its GPUs, unpadded (see
	// core/memest): the gate admits it to lanes with this and pads it.
	Memory memest.Estimate
	// DurationS and Iterations are what the job declared, 0 when unknown;
	// the srtf policy reads them.
	DurationS  float64
	Iterations int64
}

// Resources are the CPUs and host memory the scheduler allocated to a
// job's part on one machine (docs/synergy.md). The agent enforces them
// with cgroups where it can.
type Resources struct {
	CPUMilli int64
	MemMiB   int64
	// PropCPUMilli is the job's proportional share of CPUs: profiling
	// never goes below it.
	PropCPUMilli int64
	// ProfileMaxMilli, when positive, asks for the job's CPU sensitivity
	// to be profiled, from PropCPUMilli up to this quota.
	ProfileMaxMilli int64
}

// WholeCPUs is an allocation of milli thousandths of a core in whole
// CPUs, as a job is told it and sacct's AllocCPUS counts it: rounded up
// (a quota of 2.5 cores is 3 CPUs, each busy 5/6 of the time).
func WholeCPUs(milli int64) int64 { return (max(milli, 0) + 999) / 1000 }

// Env are the variables that tell a job's part its allocation on its
// machine, for tasks processes there: GPUPORTAL_CPUS and
// SLURM_CPUS_ON_NODE (WholeCPUs), SLURM_CPUS_PER_TASK (those over the
// tasks, at least 1), GPUPORTAL_MEM_MIB and SLURM_MEM_PER_NODE (MiB), as
// a Slurm job's script reads them (--num_workers $SLURM_CPUS_PER_TASK);
// none of a part without an allocation (r nil, or 0). They are the
// allocation when the run starts: the scheduler may change it while the
// run goes on (docs/synergy.md).
func (r *Resources) Env(tasks int) []string {
	if r == nil {
		return nil
	}
	var env []string
	if r.CPUMilli > 0 {
		cpus := WholeCPUs(r.CPUMilli)
		each := max(cpus/int64(max(tasks, 1)), 1)
		env = append(env, "GPUPORTAL_CPUS="+strconv.FormatInt(cpus, 10), "SLURM_CPUS_ON_NODE="+strconv.FormatInt(cpus, 10),
			"SLURM_CPUS_PER_TASK="+strconv.FormatInt(each, 10))
	}
	if r.MemMiB > 0 {
		env = append(env, "GPUPORTAL_MEM_MIB="+strconv.FormatInt(r.MemMiB, 10), "SLURM_MEM_PER_NODE="+strconv.FormatInt(r.MemMiB, 10))
	}
	return env
}

// StopRequest is the engine's request that a run stop: the state its job
// goes to once the run is out, why, the first failure's exit code (a
// run stopped because a part of it failed), and when it was asked. The
// store keeps it with the job, so that a run still saving its work when
// the server restarts, or when its machine reconnects, ends as asked
// rather than as a run that ended on its own (exit 0 read as success,
// SIGTERM's exit as a failure to retry).
type StopRequest struct {
	Run    int64
	To     State
	Reason string
	Code   *int
	At     time.Time
}

// Exit reports that a job's run ended.
type Exit struct {
	Node     string
	JobID    int64
	Run      int64
	ExitCode int    // -1 when killed by a signal or never started
	Err      string // why it could not start, or the signal that ended it
	At       time.Time
	// Requeue is set when the gate stopped the job because it outgrew
	// its lane (Err says so): run it again with this estimate.
	Requeue *memest.Estimate
	// Measured is a sharing job's estimate as the gate corrected it from
	// its measured peaks, unpadded (gate.Server.Measured); nil when the
	// gate measured too few. The job's next run starts from it.
	Measured *memest.Estimate
	// Infra marks an end that is not the job's fault (its machine failed):
	// the job waits again, and the run does not count against its retries.
	Infra bool
	// EndedAs, when set, is the state the executor says the run ended in
	// that is neither the job's own exit nor a failure: Cancelled (an
	// administrator cancelled it outside gpuportal, as with scancel) or
	// TimedOut (the executor's own time limit). The job ends so.
	EndedAs State `json:",omitempty"`
	// Resume is what the run found in its checkpoint folder as it
	// started, as its usage says (Usage.Resume): with the exit too, so
	// that a run that ends before its usage is read still says what it
	// resumed from. Nil: not said.
	Resume *Resume `json:",omitempty"`
	// Checkpoint is what the run's checkpoint folder holds as it ends
	// (the server keeps a copy of it, checkpoint.go); nil: not said.
	Checkpoint *CheckpointState `json:",omitempty"`
	// Recorded, when set, is called once the exit is durably recorded (or
	// found to be about a run that is no longer the job's, which nothing
	// records): only then may the agent forget it. It never travels.
	Recorded func() `json:"-"`
}

// Ref names the run that ended.
func (e Exit) Ref() RunRef { return RunRef{Job: e.JobID, Run: e.Run} }

// Usage is what a running job's part uses on one machine against what it
// was allocated.
type Usage struct {
	JobID int64
	At    time.Time
	// CPUMilli and MemMiB are the allocation (0: none).
	CPUMilli int64
	MemMiB   int64
	// UsedCPUMilli is the CPU used since the previous reading (since the
	// start for the first), in thousandths of a core; UsedMemMiB the
	// memory in use now.
	UsedCPUMilli int64
	UsedMemMiB   int64
	// Enforced: cgroups hold the job to its allocation. Otherwise Note
	// says why (NotEnforcedPrefix...).
	Enforced bool
	Note     string
	// Profile is the measured CPU profile, once profiling has finished.
	Profile []ProfilePoint
	// Resume is what the run found in its checkpoint folder as it
	// started; nil for a simulated job or a session.
	Resume *Resume
	// Checkpoint is what its checkpoint folder holds now; nil when not
	// looked at (a simulated job, a session).
	Checkpoint *CheckpointState
}

// NotEnforcedPrefix starts the note of a job whose limits are not held.
const NotEnforcedPrefix = "CPU limits not enforced: "

// ProfilePoint is one measured step of CPU profiling: the job's rate at a
// CPU quota (synergy.MeasuredCurve turns the steps into a curve).
type ProfilePoint struct {
	CPUMilli int64
	// Rate is iterations per second.
	Rate float64
}

// ErrDisconnected is wrapped by the errors of a remote machine's Start and
// Stop when its agent disconnected or did not answer in time: the job
// itself is not at fault.
var ErrDisconnected = errors.New("agent disconnected")

// ErrNoAccount is matched by the error of a start that a machine refused
// because the job's Unix account does not exist there, or may not run
// jobs there (AccountError): the job waits again, for another machine,
// without a failure counted.
var ErrNoAccount = errors.New("no Unix account for the job on the machine")

// AccountError is a start refused for the job's Unix account: Account
// has no account on Node, or (Why set) has one that may not run jobs
// there. It matches ErrNoAccount.
type AccountError struct {
	Account, Node string
	Why           string
}

func (e *AccountError) Error() string {
	if e.Why == "" {
		return fmt.Sprintf("%s has no Unix account on %s", e.Account, e.Node)
	}
	return fmt.Sprintf("%s's Unix account on %s may not run jobs: %s", e.Account, e.Node, e.Why)
}

// Is makes the error match ErrNoAccount.
func (e *AccountError) Is(target error) bool { return target == ErrNoAccount }

// ErrBusy is wrapped by the error of a start on a machine that still runs
// another run of the same job (one it was asked to stop, say): the new run
// may start once that one has ended.
var ErrBusy = errors.New("another run of the job still runs here")

// Resume is what a run found in its job's checkpoint folder on its
// machine as it started: the checkpoint it resumes from, or none. The
// agent gives the run GPUPORTAL_RESUME=1 (and GPUPORTAL_RESUME_RUN) when
// the folder holds files, and reports it with the run's usage.
type Resume struct {
	Run int64
	// FromRun is the earlier run of the job that wrote the newest file
	// of the folder, as the machine's record of its runs says; 0 when
	// the folder is empty or the writer is not known (files put there
	// otherwise, a record lost).
	FromRun int64
	// CheckpointAt is when the newest file in the folder was written;
	// zero: the folder was empty, and the run starts from scratch.
	CheckpointAt time.Time
	// FromNode is the machine the checkpoint was saved on, when the
	// server's copy of it was restored on this one (checkpoint.go); "":
	// this machine's own folder.
	FromNode string `json:",omitempty"`
}

// Resumed reports whether the run starts from a checkpoint.
func (r Resume) Resumed() bool { return !r.CheckpointAt.IsZero() }

// killedWords begin the reason of a run a signal ended (KilledBy).
const killedWords = "killed by signal "

// KilledBy is the reason of a run that signal sig ended, in the words
// every machine uses, so that SignalOf reads it back: "killed by signal
// 9 (killed)" for syscall.SIGKILL, whose name its String method gives
// (the scheduling core, which imports this package, imports no syscall).
func KilledBy[S ~int](sig S) string {
	return fmt.Sprintf("%s%d (%v)", killedWords, int(sig), sig)
}

// SignalOf is the signal that ended the run reason tells of (KilledBy's
// words, the last such mention), or 0 where no signal did: what sacct's
// ExitCode shows after the colon.
func SignalOf(reason string) int {
	i := strings.LastIndex(reason, killedWords)
	if i < 0 {
		return 0
	}
	rest := reason[i+len(killedWords):]
	n := 0
	for n < len(rest) && '0' <= rest[n] && rest[n] <= '9' {
		n++
	}
	sig, err := strconv.Atoi(rest[:n])
	if err != nil || sig <= 0 || sig > 64 {
		return 0
	}
	return sig
}
