// Package salussim simulates Salus GPU sharing over a cluster trace: it
// replays jobs on N identical GPUs and compares running every job on
// whole GPUs (SharingNone) with co-locating the jobs that ask for a
// fraction of a GPU in lanes (SharingSalus, through core/lanes).
//
// It stands apart from core/sim and core/sched on purpose: its cluster
// order is fixed and simple (arrival order with skip-ahead, no
// preemption: the reference simulator's fjf), so that the only thing that
// differs between its two modes is sharing. docs/salus.md gives the
// model, the command and the figures.
//
// The simulation is event driven and deterministic. Times are seconds.
package salussim
