// Package gpu reads the GPUs of one machine: their identity and, once a
// second, their memory, utilization and the memory of each job on them.
// Back ends: a simulated GPU for demos and tests (here) and NVML.
package gpu

import "time"

// Device describes one GPU.
type Device struct {
	Index  int
	UUID   string
	Model  string
	MemMiB int64
}

// JobMem is the memory one job holds on a GPU.
type JobMem struct {
	JobID  int64
	MemMiB int64
}

// ProcMem is the memory one process holds on a GPU, as NVML reports it.
type ProcMem struct {
	PID    int
	MemMiB int64
}

// Sample is one reading of one GPU. Fields a back end cannot read are
// zero.
type Sample struct {
	At         time.Time
	Index      int
	MemUsedMiB int64
	MemMiB     int64
	// MemReservedMiB is memory the driver reserves for itself, counted in
	// neither MemUsedMiB nor what jobs can allocate (NVML's v2 memory
	// info, DCGM's FB_RESERVED); 0 where the driver does not say.
	MemReservedMiB int64
	UtilPct        float64
	// Jobs is the memory of each job on the GPU. The simulated back end
	// fills it; for NVML the agent fills it from Processes, since only the
	// agent knows which processes belong to which job.
	Jobs []JobMem
	// TempC is the GPU's core temperature in degrees Celsius.
	TempC int
	// PowerW is the GPU's power draw in watts.
	PowerW float64
	// ECCErrors counts uncorrected ECC memory errors since the driver
	// loaded: a GPU whose count grows is failing.
	ECCErrors uint64
	// XIDErrors counts the critical XID events (see CriticalXID) the back
	// end has seen on the GPU since it started, and LastXID is the code of
	// the last one. A GPU whose count grows has failed.
	XIDErrors uint64
	LastXID   int
	// Processes lists the processes holding memory on the GPU, as NVML
	// reports them. The agent moves the memory of its jobs' processes
	// into Jobs and leaves the other processes here.
	Processes []ProcMem
}

// Backend is a source of GPU readings for one machine.
type Backend interface {
	Devices() []Device
	// Sample reads every GPU at time now.
	Sample(now time.Time) []Sample
}
