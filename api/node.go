package api

import "time"

// Node is a machine as the API shows it: a connected one, or one that
// disconnected within the hour, as last known (Unheard).
type Node struct {
	Name        string    `json:"name"`
	State       string    `json:"state"` // ready, cordoned, draining or drained
	ConnectedAt time.Time `json:"connected_at"`
	CPUs        int       `json:"cpus"`
	MemMiB      int64     `json:"mem_mib"`
	GPUs        []GPU     `json:"gpus"`
	Jobs        []int64   `json:"jobs"`
	// LiveMemoryUnavailable says why the GPUs' live memory is unknown
	// (a Slurm node without a monitor-only agent); empty when known.
	LiveMemoryUnavailable string `json:"live_memory_unavailable,omitempty"`
	// CPUAllocatedMilli and MemAllocatedMiB are what the scheduler
	// allocated to the jobs running there (docs/synergy.md).
	CPUAllocatedMilli int64 `json:"cpu_allocated_milli"`
	MemAllocatedMiB   int64 `json:"mem_allocated_mib"`
	// LastHeardAt is when the server last heard the machine's agent (its
	// last heartbeat; for a machine that disconnected, when it did), and
	// LastHeardS how many seconds ago; absent for the server's built-in
	// machines, always heard.
	LastHeardAt *time.Time `json:"last_heard_at,omitempty"`
	LastHeardS  *float64   `json:"last_heard_s,omitempty"`
	// Unheard: the server cannot hear the machine now (it disconnected,
	// or its agent has been silent for over 3 s, three heartbeats): what
	// the answer says of it is its last known state, as of LastHeardAt.
	Unheard bool `json:"unheard,omitempty"`
	// Note, in a follower replica's answer to an admin's action, says
	// that the leader applies it on its next pass.
	Note string `json:"note,omitempty"`
}

// GPU is one GPU of a machine.
type GPU struct {
	Index  int    `json:"index"`
	UUID   string `json:"uuid"`
	Model  string `json:"model"`
	MemMiB int64  `json:"mem_mib"`
	// Health is ok, or unhealthy when the GPU reported an error (Fault
	// says which) and takes no new jobs until an admin clears it.
	Health string `json:"health"`
	Fault  string `json:"fault,omitempty"`
}
