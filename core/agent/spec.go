package agent

import (
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/gpu"
)

// Wire encodes the spec for a remote agent.
func (s Spec) Wire() wire.JobSpec {
	w := wire.JobSpec{
		JobID: s.JobID, Command: s.Command, GPUs: s.GPUs,
		SimRemainingMS: s.SimRemaining.Milliseconds(),
	}
	if s.Memory != (gpu.SimMemory{}) {
		w.SimMemory = &wire.SimMemory{
			PersistentMiB: s.Memory.PersistentMiB, EphemeralMiB: s.Memory.EphemeralMiB,
			IterationMS: s.Memory.Iteration.Milliseconds(),
		}
	}
	return w
}

// SpecFromWire decodes a spec sent by the server.
func SpecFromWire(w wire.JobSpec) Spec {
	s := Spec{
		JobID: w.JobID, Command: w.Command, GPUs: w.GPUs,
		SimRemaining: time.Duration(w.SimRemainingMS) * time.Millisecond,
	}
	if m := w.SimMemory; m != nil {
		s.Memory = gpu.SimMemory{
			PersistentMiB: m.PersistentMiB, EphemeralMiB: m.EphemeralMiB,
			Iteration: time.Duration(m.IterationMS) * time.Millisecond,
		}
	}
	return s
}

// Wire encodes the exit for the server.
func (e Exit) Wire() wire.Exit {
	return wire.Exit{Node: e.Node, JobID: e.JobID, ExitCode: e.ExitCode, Err: e.Err, At: e.At}
}

// ExitFromWire decodes an exit sent by an agent.
func ExitFromWire(w wire.Exit) Exit {
	return Exit{Node: w.Node, JobID: w.JobID, ExitCode: w.ExitCode, Err: w.Err, At: w.At}
}
