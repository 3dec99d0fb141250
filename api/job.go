package api

import (
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// Job is a job as the API, the job:<id> topic and the CLI show it.
type Job struct {
	ID      int64     `json:"id"`
	Name    string    `json:"name"`
	Team    string    `json:"team"`
	User    string    `json:"user"`
	GPUs    int       `json:"gpus"`
	State   job.State `json:"state"`
	Reason  string    `json:"reason"`
	Command []string  `json:"command,omitempty"`
	// Image is the container image the command runs in; absent: the
	// command runs on the machine.
	Image string `json:"image,omitempty"`
	// TasksPerGPU: the command runs once per GPU rather than once per
	// machine (docs/multinode.md).
	TasksPerGPU bool `json:"tasks_per_gpu,omitempty"`
	// Priority is a batch job's priority within its team: high, normal
	// or low; absent for a session.
	Priority string `json:"priority,omitempty"`
	// Session is set for an interactive session job (session.go).
	Session  *Session `json:"session,omitempty"`
	Sim      *SimSpec `json:"sim,omitempty"`
	GPUMemGB float64  `json:"gpu_mem_gb,omitempty"`
	Model    string   `json:"model,omitempty"`
	Queue    int      `json:"queue"`
	// Position is a waiting job's place in its queue in the scheduler's
	// order, 1 the next to start: what its reason's "N jobs ahead" counts
	// (N is Position-1) and the Queues page's order. Absent for a job not
	// waiting, and on a replica that does not schedule.
	Position    int        `json:"position,omitempty"`
	SubmittedAt time.Time  `json:"submitted_at"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	// JCTS is the job completion time, finish minus submit; null until
	// the job ends.
	JCTS      *float64 `json:"jct_s"`
	Placement []string `json:"placement"`
	ExitCode  *int     `json:"exit_code"`
	// ExecutedS and AttainedService are the seconds the job has run and
	// the GPU-seconds it has attained (GPUs x seconds) over all its runs,
	// the run in progress included. While it runs they grow, and AsOf
	// says when they were read.
	ExecutedS       float64    `json:"executed_s"`
	AttainedService float64    `json:"attained_service_gpu_s"`
	AsOf            *time.Time `json:"as_of,omitempty"`
	// HeldGPUs is the GPUs the job holds now: a whole GPU each, or on a
	// shared GPU its share of it; 0 unless it runs.
	HeldGPUs    float64    `json:"held_gpus"`
	Preemptions int        `json:"preemptions"`
	Failures    int        `json:"failures"`
	RetryAt     *time.Time `json:"retry_at"`
	// Held: the job waits but is never scheduled (a sharing job requeued
	// too often for outgrowing its lane without progress); Reason says
	// why and what to do.
	Held bool `json:"held"`
	// Forecast is when a waiting job is expected to start, or why it
	// cannot (see GET /api/v1/stats/estimates for how good forecasts have
	// been); null unless the job waits.
	Forecast *Forecast `json:"forecast"`
	// Reservation is the GPUs the scheduler holds for a waiting job that
	// has waited past its bound and cannot start (docs/scheduling.md,
	// "Reservations"), as of its last pass; absent when none, and on a
	// replica that does not schedule.
	Reservation *Reservation `json:"reservation,omitempty"`
	// Borrowed: the job runs beyond its team's guarantee and may be
	// reclaimed. Only a job of a team over its guarantee borrows.
	Borrowed bool `json:"borrowed"`
	// ReclaimableAt: for a borrowed job, when a team under its guarantee
	// may take the GPUs back (its minimum runtime since it started, or
	// its reservation bound if longer for a job that asked more than its
	// team's guarantee and started due: docs/scheduling.md, "Reservations
	// under fair share", rule 4), as of the scheduler's last pass; in the
	// past once it may be reclaimed now. Absent when it does not borrow.
	ReclaimableAt *time.Time `json:"reclaimable_at,omitempty"`
	// Salus sharing: whether the job shares its GPU, the fraction of a
	// GPU it asked for (0: none), its memory estimate (unpadded; measured
	// after it outgrew a lane), and while it runs, its lane.
	Sharing        bool            `json:"sharing"`
	GPUFraction    float64         `json:"gpu_fraction,omitempty"`
	MemoryEstimate *MemoryEstimate `json:"memory_estimate,omitempty"`
	BatchSize      int             `json:"batch_size,omitempty"`
	Parameters     int64           `json:"parameters,omitempty"`
	Lane           *JobLane        `json:"lane,omitempty"`
	// CPUProfile is the CPU and host memory sensitivity profile the user
	// declared at submission (source "declared"); absent when none was.
	CPUProfile *CPUProfile `json:"cpu_profile,omitempty"`
	// Resources are a running job's CPUs and host memory: allocated and
	// used per node, and its sensitivity profile (docs/synergy.md).
	Resources *JobResources `json:"resources,omitempty"`
	// AllocCPUs are the whole CPUs the current or last run was told on
	// its machines (GPUPORTAL_CPUS), summed: what it was given, after
	// it has ended too; absent before a start and where no CPUs were
	// allocated.
	AllocCPUs int64 `json:"alloc_cpus,omitempty"`
	// Env are the job's own variables; Workdir the folder it starts in
	// ("": its job folder).
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	// TimeLimitS bounds the seconds the job runs over all its runs
	// (null: no limit); TimeLeftS is what remains of it as of AsOf (or
	// now), never below 0; null without a limit.
	TimeLimitS *float64 `json:"time_limit_s"`
	TimeLeftS  *float64 `json:"time_left_s"`
	// Retries is how many times a run that fails on its own is started
	// again, as the submission asked.
	Retries int `json:"retries"`
	// Dependencies are the jobs it waits for.
	Dependencies []job.Dependency `json:"dependencies,omitempty"`
	// Array is the array the job is a task of; absent when none.
	Array *ArrayTask `json:"array,omitempty"`
	// Idle is a running job's idle-GPU verdict (api.Idle), in lists and
	// pages alike.
	Idle *Idle `json:"idle,omitempty"`
	// Usage is how the job used its GPUs over its run, without the
	// points: only in GET /api/v1/jobs/{id} (points: .../usage).
	Usage *JobUsage `json:"usage,omitempty"`
	// Resume is what the job's latest run after its first found in its
	// checkpoint folder as it started, and what faults have cost; absent
	// until such a run has been heard from.
	Resume *JobResume `json:"resume,omitempty"`
	// CheckpointCopies are the server's copies of the job's checkpoint
	// folders, one per part, which a run on another machine resumes from;
	// in the answer about one job only.
	CheckpointCopies []CheckpointCopy `json:"checkpoint_copies,omitempty"`
}

// JobResume says which run resumed from which checkpoint: the checkpoint
// folder (GPUPORTAL_CHECKPOINT_DIR) is the job's, kept across its runs on
// a machine, or across machines that share the agents' work folder; a run
// on a machine without it starts from scratch (docs/agents.md).
type JobResume struct {
	// Run is the run that started; FromRun the earlier run that wrote the
	// checkpoint it found (absent: not known, or none).
	Run     int64 `json:"run"`
	FromRun int64 `json:"from_run,omitempty"`
	// CheckpointAt is when that checkpoint was written; absent: the run
	// started from scratch.
	CheckpointAt *time.Time `json:"checkpoint_at,omitempty"`
	// FromNode is the machine the checkpoint was saved on, when the
	// server's copy of it was restored on another machine (absent: the
	// run's own machine's folder).
	FromNode string `json:"from_node,omitempty"`
	// LostS is the seconds of work the stop before the run cost (what it
	// redoes: the earlier runs' time after the checkpoint);
	// LostTotalS that of every such stop of the job.
	LostS      float64 `json:"lost_s"`
	LostTotalS float64 `json:"lost_total_s"`
}

// CheckpointCopy is the server's copy of a part of a job's checkpoint
// folder: the part (its rank), the run that wrote its newest file (0: not
// known) and the machine it was read from, when that file was written,
// and the copy's size on the server's disk.
type CheckpointCopy struct {
	Part      int       `json:"part"`
	Run       int64     `json:"run,omitempty"`
	Node      string    `json:"node"`
	WrittenAt time.Time `json:"written_at"`
	Bytes     int64     `json:"bytes"`
}

// ArrayTask places a job in its array: the array's ID (its first task's),
// the task's index, and how many tasks may run at once (0: no limit).
type ArrayTask struct {
	ID    int64 `json:"id"`
	Index int   `json:"index"`
	Limit int   `json:"limit"`
}

// Array is an array of tasks (a sweep) as GET /api/v1/arrays/{id} shows
// it: its tasks, by index, and how many are in each state.
type Array struct {
	ID     int64             `json:"id"`
	Name   string            `json:"name"`
	Team   string            `json:"team"`
	User   string            `json:"user"`
	Limit  int               `json:"limit"`
	States map[job.State]int `json:"states"`
	Tasks  []Job             `json:"tasks"`
}

// SimSpec describes a simulated training job.
type SimSpec struct {
	DurationS float64 `json:"duration_s"`
	// UtilPct, when set, is the job's GPU utilization all along (0 to
	// 100): near 0 simulates a job that holds its GPUs without using
	// them. Unset, it follows a training iteration (about 88%).
	UtilPct *float64 `json:"util_pct,omitempty"`
}

// Event is one step of a job's history: the state it entered, when and why.
type Event struct {
	At     time.Time `json:"at"`
	State  job.State `json:"state"`
	Detail string    `json:"detail"`
}

// MemoryEstimate is a job's memory estimate on its GPU, unpadded:
// persistent memory P, ephemeral memory E, and where it came from
// (declared, catalogue, params, measured).
type MemoryEstimate struct {
	PersistentMiB int64  `json:"persistent_mib"`
	EphemeralMiB  int64  `json:"ephemeral_mib"`
	Source        string `json:"source"`
}

// JobLane says where a sharing job runs: its GPU, its lane and the jobs
// it shares them with.
type JobLane struct {
	Node    string `json:"node"`
	GPU     int    `json:"gpu"`
	Lane    int    `json:"lane"`
	SizeMiB int64  `json:"size_mib"`
	// LaneJobs are the others of its lane, taking turns with it;
	// GPUJobs the jobs of the GPU's other lanes, running beside it.
	LaneJobs []int64 `json:"lane_jobs"`
	GPUJobs  []int64 `json:"gpu_jobs"`
	Running  int64   `json:"running"`
	// Held is the padded memory the job holds in its lane, corrected from
	// its measured peaks once it has some (source "measured");
	// MaxPeakMiB is its largest measured ephemeral peak, Iterations how
	// many it ran.
	Held       MemoryEstimate `json:"held"`
	MaxPeakMiB int64          `json:"max_peak_mib"`
	Iterations int64          `json:"iterations"`
}

// JobResources are a running job's CPUs and memory.
type JobResources struct {
	Allocations []Allocation `json:"allocations"`
	Profile     CPUProfile   `json:"profile"`
}

// Allocation is a job's part on one node.
type Allocation struct {
	Node string `json:"node"`
	GPUs int    `json:"gpus"`
	// CPUMilli (thousandths of a core) and MemMiB are allocated;
	// PropCPUMilli and PropMemMiB are the proportional share.
	CPUMilli     int64 `json:"cpu_milli"`
	MemMiB       int64 `json:"mem_mib"`
	PropCPUMilli int64 `json:"prop_cpu_milli"`
	PropMemMiB   int64 `json:"prop_mem_mib"`
	// UsedCPUMilli and UsedMemMiB are what the job uses, as its agent
	// last reported; null before the first report.
	UsedCPUMilli *int64 `json:"used_cpu_milli"`
	UsedMemMiB   *int64 `json:"used_mem_mib"`
	// Enforced: cgroups hold the job to its allocation; Note says why not.
	Enforced bool   `json:"enforced"`
	Note     string `json:"note,omitempty"`
	// Speed and PropSpeed are the profile's speed under the allocation
	// and under the proportional share (1 is the job's best).
	Speed     float64 `json:"speed"`
	PropSpeed float64 `json:"prop_speed"`
	Reason    string  `json:"reason"`
}

// CPUProfile is a job's sensitivity: speed against cores per GPU and
// against GiB of host memory per GPU, as [x, speed] points.
type CPUProfile struct {
	// Source is declared, history, catalogue or none.
	Source string       `json:"source"`
	Family string       `json:"family"`
	CPU    [][2]float64 `json:"cpu"`
	Mem    [][2]float64 `json:"mem"`
}

// JobUpdate is what the job:<id> topic sends: the job, and its GPU
// memory (the last 10 minutes in the snapshot, the newest second in
// each update).
type JobUpdate struct {
	Job    Job         `json:"job"`
	Memory []JobMemory `json:"memory"`
}

// Reservation is the GPUs held for a waiting job from when they are
// expected to be free: other jobs start on them only if they end before
// then, or give them back then.
type Reservation struct {
	// GPUs are "node:index" names; empty in count placement, which
	// names none.
	GPUs []string `json:"gpus"`
	// Count is how many GPUs are held: the job's.
	Count int `json:"count"`
	// From is the scheduler's estimate of when they are free, from the
	// running jobs' time limits or the median remaining run time of jobs
	// like them: other jobs start on them meanwhile only if they end by
	// then (or may be preempted). It is not the job's expected start:
	// that is its Forecast, drawn from many samples of the running and
	// coming jobs' run times, which the pages show.
	From time.Time `json:"from"`
	// Due is when the job became due for a reservation: when it had
	// waited its bound less the server's lead (serve --reserve-lead,
	// half the bound by default), or its bound without a lead. It is
	// reserved from then, and under a preemptive policy takes its GPUs
	// from any batch job once it has waited its bound (without a lead,
	// its bound again). The same on every server: it follows from the
	// job's stored times.
	Due time.Time `json:"due"`
}
