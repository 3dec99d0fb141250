package api

// GPUSeries is one GPU and its readings: GET /api/v1/gpus, the gpus topic
// (the last 10 minutes of every GPU in the snapshot, the newest reading
// of every GPU in each update) and the gpu:<uuid> topic (one GPU).
type GPUSeries struct {
	UUID   string  `json:"uuid,omitempty"`
	Node   string  `json:"node"`
	Index  int     `json:"index"`
	Model  string  `json:"model,omitempty"`
	Points []Point `json:"points"`
	// Lanes are the GPU's Salus lanes now, when its agent serves a gate.
	Lanes *GPULanes `json:"lanes,omitempty"`
}

// Point is one reading of one GPU.
type Point struct {
	T          int64 `json:"t"` // Unix seconds
	MemUsedMiB int64 `json:"mem_used_mib"`
	MemMiB     int64 `json:"mem_mib"`
	// MemReservedMiB is memory the driver reserves for itself, in neither
	// mem_used_mib nor what jobs can allocate; absent where the driver
	// does not say.
	MemReservedMiB int64   `json:"mem_reserved_mib,omitempty"`
	UtilPct        float64 `json:"util_pct"`
	// Jobs are the jobs with memory on the GPU and the memory each holds,
	// as the machine measured it.
	Jobs []PointJob `json:"jobs"`
	// Held are the jobs the scheduler had placed on the GPU at T (running
	// jobs' placements): the GPU is busy when there is one, as on the
	// cluster page and in /metrics, whatever memory they hold yet.
	Held []int64 `json:"held"`
	// PowerW and TempC are absent where the GPU does not report them.
	PowerW float64 `json:"power_w,omitempty"`
	TempC  int     `json:"temp_c,omitempty"`
}

// PointJob is a job on a GPU and the memory it holds there.
type PointJob struct {
	JobID  int64 `json:"job_id"`
	MemMiB int64 `json:"mem_mib"`
}

// JobMemory is the GPU memory a job holds on one of its GPUs at one time
// (GET /api/v1/jobs/{id}/memory, the job:<id> topic).
type JobMemory struct {
	T      int64  `json:"t"` // Unix seconds
	Node   string `json:"node"`
	GPU    int    `json:"gpu"` // the GPU's index on Node
	MemMiB int64  `json:"mem_mib"`
}

// GPULanes is one GPU's Salus lanes (docs/salus.md).
type GPULanes struct {
	CapacityMiB int64 `json:"capacity_mib"`
	// UsedMiB is what the safety condition counts: the jobs' P plus each
	// lane's size.
	UsedMiB       int64  `json:"used_mib"`
	PersistentMiB int64  `json:"persistent_mib"`
	Lanes         []Lane `json:"lanes"`
}

// Lane is one lane: a slice of the GPU's ephemeral memory its jobs share
// in time, one iteration at a time.
type Lane struct {
	ID      int   `json:"id"`
	SizeMiB int64 `json:"size_mib"`
	// Running is the job whose iteration runs now, 0 when none.
	Running  int64     `json:"running"`
	Draining bool      `json:"draining"`
	Jobs     []LaneJob `json:"jobs"`
}

// LaneJob is a job of a lane with the padded memory it holds.
type LaneJob struct {
	JobID         int64  `json:"job_id"`
	PersistentMiB int64  `json:"persistent_mib"`
	EphemeralMiB  int64  `json:"ephemeral_mib"`
	Source        string `json:"source"`
	MaxPeakMiB    int64  `json:"max_peak_mib"`
	Iterations    int64  `json:"iterations"`
}

// GPULanesUpdate is one GPU's lanes in the gpus topic's "lanes" messages.
type GPULanesUpdate struct {
	Node  string   `json:"node"`
	Index int      `json:"index"`
	Lanes GPULanes `json:"lanes"`
}

// HistoryPoint is one GPU over one step of a range.
type HistoryPoint struct {
	T             int64    `json:"t"`      // Unix seconds, the step's start
	Step          int64    `json:"step_s"` // 1, 60, 300 or 3600
	Samples       int      `json:"samples"`
	MemMiB        int64    `json:"mem_mib"`
	MemUsedAvgMiB float64  `json:"mem_used_avg_mib"`
	MemUsedMaxMiB int64    `json:"mem_used_max_mib"`
	UtilAvgPct    float64  `json:"util_avg_pct"`
	BusyPct       float64  `json:"busy_pct"` // share of the step with a job on the GPU
	PowerAvgW     *float64 `json:"power_avg_w,omitempty"`
	TempAvgC      *float64 `json:"temp_avg_c,omitempty"`
}

// GPUHistory is one GPU's history over a range.
type GPUHistory struct {
	UUID   string         `json:"uuid"`
	Node   string         `json:"node"`
	Index  int            `json:"index"`
	Range  string         `json:"range"`
	Step   int64          `json:"step_s"`
	Points []HistoryPoint `json:"points"`
}

// ClusterHistory is the cluster over a range: GPUs busy, memory used and
// jobs by state.
type ClusterHistory struct {
	Range  string             `json:"range"`
	Step   int64              `json:"step_s"`
	Points []ClusterPoint     `json:"points"`
	Jobs   []ClusterJobsPoint `json:"jobs"`
}

// ClusterPoint is the cluster's GPUs over one step.
type ClusterPoint struct {
	T          int64   `json:"t"`
	GPUs       int     `json:"gpus"`
	BusyGPUs   float64 `json:"busy_gpus"`
	MemUsedMiB float64 `json:"mem_used_mib"`
	MemMiB     int64   `json:"mem_mib"`
}

// ClusterJobsPoint is the number of jobs in each state at one time (the
// average over the step).
type ClusterJobsPoint struct {
	T         int64   `json:"t"`
	Queued    float64 `json:"queued"`
	Running   float64 `json:"running"`
	Preempted float64 `json:"preempted"`
}

// GPUWall is what a new viewer of the live gpus topic is sent first: the
// live window of every GPU, bounded whatever the number of GPUs (the
// updates then bring each second).
type GPUWall struct {
	From int64 `json:"from"`   // Unix seconds: where the first step starts
	Step int64 `json:"step_s"` // seconds per step: more GPUs, longer steps
	// Cluster is the cluster's GPUs busy and memory each second of the
	// window, as GET /cluster/history?range=10m.
	Cluster []ClusterPoint `json:"cluster"`
	GPUs    []GPUWindow    `json:"gpus"`
}

// GPUsUpdate is an update of the gpus topic (the cluster page's GPU
// wall and utilization chart): the newest reading of each GPU that read
// since the last update, grouped by machine and time, each GPU in a few
// numbers. A second of 1,024 GPUs is about 25 kB this way, 150 kB as
// GPUSeries (issue 33); a GPU's whole reading is GET /api/v1/gpus and the
// gpu:<uuid> topic.
type GPUsUpdate struct {
	T     int64          `json:"t"` // Unix seconds: when the update was made
	Nodes []NodeReadings `json:"nodes"`
}

// NodeReadings are the readings of one machine's GPUs at one time.
type NodeReadings struct {
	Node string `json:"node"`
	T    int64  `json:"t"` // Unix seconds: when the machine read them
	// GPUs are one reading each: the GPU's index, its memory used and its
	// memory (MiB), then the jobs placed on it (Point.Held), if any.
	GPUs [][]int64 `json:"gpus"`
}

// GPUWindow is one GPU over the live window.
type GPUWindow struct {
	UUID  string `json:"uuid,omitempty"`
	Node  string `json:"node"`
	Index int    `json:"index"`
	Model string `json:"model,omitempty"`
	// UsedMaxMiB is the most memory used in each step from GPUWall.From,
	// so that no peak is lost; null for a step with no reading.
	UsedMaxMiB []*int64 `json:"used_max_mib"`
	// Last is the GPU's newest reading; absent if none in the window.
	Last *Point `json:"last,omitempty"`
	// Lanes are the GPU's Salus lanes now, when its agent serves a gate.
	Lanes *GPULanes `json:"lanes,omitempty"`
}
