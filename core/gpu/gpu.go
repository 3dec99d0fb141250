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

// Sample is one reading of one GPU.
type Sample struct {
	At         time.Time
	Index      int
	MemUsedMiB int64
	MemMiB     int64
	UtilPct    float64
	Jobs       []JobMem
}

// Backend is a source of GPU readings for one machine.
type Backend interface {
	Devices() []Device
	// Sample reads every GPU at time now.
	Sample(now time.Time) []Sample
}
