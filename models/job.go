package models

import (
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
)

// JobState is a job's place in its life cycle.
type JobState = job.State

// The job states, as the store names them.
const (
	JobQueued    = job.Queued
	JobRunning   = job.Running
	JobPreempted = job.Preempted
	JobSucceeded = job.Succeeded
	JobFailed    = job.Failed
	JobCancelled = job.Cancelled
	JobTimedOut  = job.TimedOut
)

// UnfinishedStates are the states of jobs the scheduler still looks at.
var UnfinishedStates = []JobState{JobQueued, JobRunning, JobPreempted}

// Job is one submitted training job.
type Job struct {
	ID   int64  `gorm:"primaryKey"`
	Name string `gorm:"size:128;not null"`
	Team string `gorm:"size:64;index;not null"`
	User string `gorm:"size:64;index;not null"`
	GPUs int    `gorm:"not null"`

	// Either Command (argv, JSON-encoded) or a simulated workload.
	Command     Strings `gorm:"type:text"`
	SimDuration float64 // seconds of run time of a simulated job
	// SimUtilPct is a simulated job's GPU utilization while it runs
	// (0 to 100); nil for a training job's usual one (gpu.SimMemory).
	SimUtilPct *float64
	GPUMemMiB  int64  // declared memory per GPU, 0 when unknown
	Model      string `gorm:"size:64"` // declared model, for placement (see sched.Models)
	// Image is the container image the command runs in (docs/agents.md,
	// "Container jobs"); empty: the command runs on the machine.
	Image string `gorm:"size:512;default:''"`
	// TasksPerGPU starts the command once per GPU rather than once per
	// machine (docs/multinode.md).
	TasksPerGPU bool `gorm:"not null;default:false"`

	// Salus sharing (docs/salus.md). Sharing: the job may share its one
	// GPU with other sharing jobs; GPUFraction, in (0, 1) when asked for,
	// implies it. MemPersistentMiB and MemEphemeralMiB are its memory
	// estimate on its GPU, unpadded, and MemSource where it came from
	// (core/memest: declared, catalogue, params, measured); 0 when unknown.
	// BatchSize and Parameters are what the user declared for the estimate.
	Sharing          bool
	GPUFraction      float64
	MemPersistentMiB int64
	MemEphemeralMiB  int64
	MemSource        string `gorm:"size:16"`
	BatchSize        int
	Parameters       int64
	// CPUProfile is the CPU and host memory sensitivity profile the user
	// declared (docs/synergy.md), as JSON (declaredprofile.go); empty
	// when none was. It comes before history and the catalogue.
	CPUProfile string `gorm:"type:text"`

	// What the job runs with (docs/portal.md, "Jobs"): its own variables
	// ("NAME=VALUE", job.ParseEnv), the folder it starts in ("": its job
	// folder), its time limit over all its runs (0: none; job.TimeLeft),
	// and how many times a run that fails on its own is started again.
	Env        Strings `gorm:"type:text"`
	Workdir    string  `gorm:"size:1024"`
	TimeLimitS int64
	Retries    int
	// Dependencies are the jobs it waits for, as Slurm writes them
	// ("afterok:41", job.ParseDependencies).
	Dependencies Strings `gorm:"type:text"`
	// An array's tasks share ArrayID, the ID of its first task (0: not
	// a task); ArrayIndex is the task's index, ArrayLimit how many of
	// the array's tasks may run at once (0: no limit).
	ArrayID    int64 `gorm:"index"`
	ArrayIndex int
	ArrayLimit int
	// Interactive sessions (jobsession.go): SessionType is empty for a
	// batch job; SessionPort is the port a web app listens on (0: the
	// agent picks one); SessionSecret is the salt the secret of the
	// session's URL prefix (/sessions/ID/SECRET/) and its own token are
	// derived from with the server's key (Store.SessionPrefix,
	// Store.SessionToken), never the secrets themselves.
	SessionType   string `gorm:"size:16;default:''"`
	SessionPort   int    `gorm:"not null;default:0"`
	SessionSecret string `gorm:"size:64;default:''"`
	// SessionToken is empty but for a session that was running when the
	// server was upgraded from a version that stored its token in clear
	// (sealLegacySessions).
	SessionToken string `gorm:"size:64;default:''"`
	// IdempotencyKey is the key its owner's client submitted it with
	// (Idempotency-Key; unique per user, "" for none), RequestDigest the
	// SHA-256 of that request: a retry with the key gets this job back,
	// another request with it is refused (JobByIdempotencyKey).
	IdempotencyKey string `gorm:"size:255;default:''"`
	RequestDigest  string `gorm:"size:64;default:''"`
	// KeepAliveUntil: its owner keeps it running though idle until then
	// (gpuportal session keep-alive); nil: never asked.
	KeepAliveUntil *time.Time
	// ReenteredAt is when the job went to the back of its queue, as if
	// submitted then: its idle GPUs were reclaimed (RecordReclaim), so
	// the jobs waiting then go first (sched.Job.ReenteredAt); nil: never.
	ReenteredAt *time.Time
	// InteractivePriority: the session asked to go ahead of its team's
	// other waiting jobs, within the GPUs its team allows sessions with
	// priority (Team.SessionPriorityGPUs).
	InteractivePriority bool `gorm:"not null;default:false"`
	// Priority is a batch job's priority within its team (docs/scheduling.md,
	// "Job classes"): job.PriorityHigh, PriorityLow, or "" for normal; the
	// team says which its members may use (Team.BatchPriorities).
	Priority string `gorm:"size:8;not null;default:''"`

	State       JobState `gorm:"size:16;index;not null"`
	Reason      string   `gorm:"size:512"` // why it waits, or why it ended
	SubmittedAt time.Time
	StartedAt   *time.Time // first start
	FinishedAt  *time.Time
	ExitCode    *int

	// Run numbers the job's current or last run (models.Run), 0 before
	// its first start.
	Run int64 `gorm:"not null;default:0"`

	// AllocCPUs are the whole CPUs the current or last run was told on
	// its machines, summed (engine.StartRecord): sacct's AllocCPUS once
	// the run has ended; 0 when none were allocated.
	AllocCPUs int64 `gorm:"column:alloc_cpus;not null;default:0"`

	// Where it runs now ("node:index" per GPU), and what it has consumed.
	Placement       Strings `gorm:"type:text"`
	LastStartAt     *time.Time
	ExecutedS       float64
	AttainedService float64 // GPU-seconds, over the ended runs
	// RunAccrualS, RunGPUSeconds and HeldGPUs are how the run in progress
	// attains service (usage.Accrual): in its first RunAccrualS seconds
	// it attained RunGPUSeconds, and since then it holds HeldGPUs, a
	// shared GPU counted by the job's share of it (usage.Shares). HeldGPUs
	// 0: its GPUs, whole, as every run before the share was counted.
	RunAccrualS   float64 `gorm:"column:run_accrual_s;not null;default:0"`
	RunGPUSeconds float64 `gorm:"column:run_gpu_seconds;not null;default:0"`
	HeldGPUs      float64 `gorm:"column:held_gpus;not null;default:0"`
	Preemptions   int
	Failures      int        // failed runs that were retried
	RetryAt       *time.Time // a failed job waits until then
	// RequeueStalls counts a sharing job's requeues in a row for
	// outgrowing its lane that brought no larger estimate
	// (job.Requeue.Outcome); from job.MaxRequeueStalls on, the job
	// is held (Held).
	RequeueStalls int
	// What the job's runs resumed from (resume.go): ResumeRun is the
	// last run whose start was recorded (0: none), ResumeFromRun the run
	// whose checkpoint it found (0: none or not known), ResumeCheckpointAt
	// when that checkpoint was written (nil: it started from scratch),
	// ResumeFromNode the machine it was saved on when the server's copy
	// of it was restored on another ("": the run's own machine's folder),
	// ResumeLostS the seconds of work the faults before it cost, and
	// LostS those of all its runs.
	ResumeRun          int64 `gorm:"not null;default:0"`
	ResumeFromRun      int64 `gorm:"not null;default:0"`
	ResumeCheckpointAt *time.Time
	ResumeFromNode     string  `gorm:"size:64;not null;default:''"`
	ResumeLostS        float64 `gorm:"not null;default:0"`
	LostS              float64 `gorm:"not null;default:0"`
	// HoldReason, when set, holds the job while it waits, whatever its
	// queue: its owner's account was disabled or deleted (accounts.go).
	// It says why, for the job's page.
	HoldReason string `gorm:"size:512"`
	// FirstEstimate is the first estimate of the job's start: kept to
	// measure how good the estimates are.
	FirstEstimate *time.Time
	UpdatedAt     time.Time
	// CancelRequest, when set, is the reason of a cancel asked through a
	// replica that does not schedule; the leader carries it out.
	CancelRequest string `gorm:"size:512"`
	// StopRun, when not 0, is the run the engine asked to stop, with the
	// state the job goes to once it is out (StopTo), why (StopReason),
	// the first failure's exit code (StopCode) and when (StopAt): kept so
	// that a server that restarts while the run saves its work ends it as
	// asked (job.StopRequest).
	StopRun    int64    `gorm:"not null;default:0"`
	StopTo     JobState `gorm:"size:16;not null;default:''"`
	StopReason string   `gorm:"size:512;not null;default:''"`
	StopCode   *int
	StopAt     *time.Time

	// The scheduler's memory of the job's priority queue (sched.QueueState).
	QueueIndex    int
	QueueSince    float64
	CycleStart    float64
	CycleService  float64
	CycleExecuted float64
	Promotions    int
}

// TimeLimit is the job's time limit; 0: none.
func (j *Job) TimeLimit() time.Duration { return time.Duration(j.TimeLimitS) * time.Second }

// Deps returns the jobs j waits for; a stored one that does not parse
// (it was checked at submission) is left out.
func (j *Job) Deps() []job.Dependency {
	var out []job.Dependency
	for _, s := range j.Dependencies {
		if ds, err := job.ParseDependencies(s); err == nil {
			out = append(out, ds...)
		}
	}
	return out
}

// Task returns the array task j is, nil when it is none.
func (j *Job) Task() *job.ArrayTask {
	if j.ArrayID == 0 {
		return nil
	}
	return &job.ArrayTask{ID: j.ArrayID, Index: j.ArrayIndex}
}

// QueueState is the scheduler's memory of a job's priority queue, as the
// store keeps it: the fields of sched.QueueState, which enginestore
// converts to and from.
type QueueState struct {
	Index         int
	Since         float64
	CycleStart    float64
	CycleService  float64
	CycleExecuted float64
	Promotions    int
}

// QueueState returns what the scheduler remembers of the job's queue.
func (j *Job) QueueState() QueueState {
	return QueueState{Index: j.QueueIndex, Since: j.QueueSince, CycleStart: j.CycleStart,
		CycleService: j.CycleService, CycleExecuted: j.CycleExecuted, Promotions: j.Promotions}
}

// JCT is the job completion time, finish minus submit; zero while unfinished.
func (j *Job) JCT() time.Duration {
	if j.FinishedAt == nil {
		return 0
	}
	return j.FinishedAt.Sub(j.SubmittedAt)
}

// Service is the time the job has run and the service it has attained
// as of now, the run in progress included.
func (j *Job) Service(now time.Time) usage.Service {
	var since *time.Time
	if j.State == JobRunning {
		since = j.LastStartAt
	}
	return usage.Current(usage.Service{ExecutedS: j.ExecutedS, GPUSeconds: j.AttainedService}, j.Accrual(), since, now)
}

// Accrual is how the job's run in progress attains service; a job that
// does not run holds its GPUs whole, for the run it may start.
func (j *Job) Accrual() usage.Accrual {
	a := usage.Whole(j.GPUs)
	if j.State != JobRunning {
		return a
	}
	if j.HeldGPUs > 0 {
		a.Held = j.HeldGPUs
	}
	a.At, a.GPUSeconds = j.RunAccrualS, j.RunGPUSeconds
	return a
}

// setAccrual sets the run in progress's accrual to a; usage.Whole(j.GPUs)
// (a run that starts or resumes) clears it.
func (j *Job) setAccrual(a usage.Accrual) {
	j.RunAccrualS, j.RunGPUSeconds, j.HeldGPUs = a.At, a.GPUSeconds, a.Held
	if a == usage.Whole(j.GPUs) {
		j.HeldGPUs = 0
	}
}
