// Package memest estimates a training job's GPU memory as Salus splits
// it: persistent memory P (weights, gradients, optimizer state: it lives
// across iterations) and ephemeral memory E (activations and workspace:
// allocated and freed within each iteration).
//
// An estimate comes from the first of three sources that knows the job:
// what the user declared, the built-in catalogue of measured models
// (model x batch size), or the parameter count and batch size. Admission
// pads it (Padding), and a Tracker corrects E online from the peaks
// measured per iteration.
//
// The package is pure: no I/O, no clock, no goroutines. Sizes are in MiB.
package memest
