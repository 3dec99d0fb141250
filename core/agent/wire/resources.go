package wire

import "time"

// Resources are the CPUs and host memory allocated to a job's part on a
// machine (the scheduler's allocation step, docs/synergy.md), for the
// agent to enforce with cgroups where it can.
type Resources struct {
	CPUMilli int64 `json:"cpu_milli"`
	MemMiB   int64 `json:"mem_mib"`
	// PropCPUMilli is the job's proportional share of the machine's CPUs:
	// profiling never goes below it.
	PropCPUMilli int64 `json:"prop_cpu_milli,omitempty"`
	// ProfileMaxMilli, when positive, asks the agent to profile the job's
	// CPU sensitivity (no profile is known for its model and batch), up
	// to this many thousandths of a core.
	ProfileMaxMilli int64 `json:"profile_max_milli,omitempty"`
}

// JobUsage is what a job's part uses on a machine, against what it was
// allocated, and whether the limits are enforced.
type JobUsage struct {
	JobID int64     `json:"job_id"`
	At    time.Time `json:"at"`
	// CPUMilli and MemMiB are the allocation the agent holds (0: none).
	CPUMilli int64 `json:"cpu_milli"`
	MemMiB   int64 `json:"mem_mib"`
	// UsedCPUMilli is the CPU used since the last reading, in thousandths
	// of a core; UsedMemMiB the memory in use now.
	UsedCPUMilli int64 `json:"used_cpu_milli"`
	UsedMemMiB   int64 `json:"used_mem_mib"`
	// Enforced says cgroups hold the job to its allocation; Note says why
	// not when they do not ("CPU limits not enforced: ...").
	Enforced bool   `json:"enforced"`
	Note     string `json:"note,omitempty"`
	// Profile is the job's measured CPU profile, once profiling is done.
	Profile []ProfilePoint `json:"profile,omitempty"`
	// Resume is what the run found in its checkpoint folder as it
	// started (job.Resume); absent for a simulated job, a session, and
	// from agents before it.
	Resume *Resume `json:"resume,omitempty"`
	// Checkpoint is what the run's checkpoint folder holds now
	// (checkpoint.go); absent: not looked at.
	Checkpoint *CheckpointState `json:"checkpoint,omitempty"`
}

// Resume is the checkpoint a run started from (job.Resume).
type Resume struct {
	Run     int64 `json:"run"`
	FromRun int64 `json:"from_run,omitempty"`
	// CheckpointAt is when the newest file of the checkpoint folder was
	// written; absent: the folder was empty, the run starts from scratch.
	CheckpointAt *time.Time `json:"checkpoint_at,omitempty"`
	// FromNode is the machine the checkpoint was saved on, when the
	// server's copy of it was restored (job.Resume.FromNode).
	FromNode string `json:"from_node,omitempty"`
}

// ProfilePoint is one measured step: the job's rate at a CPU quota.
type ProfilePoint struct {
	CPUMilli int64   `json:"cpu_milli"`
	Rate     float64 `json:"rate"`
}

// Resize asks the agent to change a running job's allocation on one of
// its machines (its neighbours' changed when another job started there).
type Resize struct {
	Node      string    `json:"node"`
	JobID     int64     `json:"job_id"`
	Resources Resources `json:"resources"`
}
