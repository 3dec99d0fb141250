// Package lanes shares GPUs among training jobs the way Salus does.
//
// A job's GPU memory has two parts (see core/memest): persistent memory P,
// held for the whole run, and ephemeral memory E, allocated and freed
// within each iteration. A lane is a slice of a GPU's ephemeral memory,
// shared in time by the jobs assigned to it: at most one iteration per
// lane runs at a time, and different lanes run concurrently. A GPU of
// capacity C holds its jobs safely while the safety condition holds:
//
//	sum of P over its jobs + sum over its lanes of the largest E in the lane <= C
//
// A lane's size is always the largest E among its jobs.
//
// GPU manages one device: admission (a new lane of E when P + E is free,
// else best fit into an existing lane, else merging lanes to make room),
// release, defragmentation, and the iteration scheduling within each lane
// under the pack, fair or srtf policy. Pool manages a set of GPUs: it
// picks the GPU, queues the jobs that fit nowhere, and ages them so that
// a large job is not starved by a stream of small ones.
//
// The package is pure: no I/O, no clock (times are seconds passed in by
// the caller), no goroutines, and the same calls in the same order always
// give the same answers. It is not safe for concurrent use. Memory is in
// MiB. docs/salus.md describes the model and the rules.
package lanes
