package agent

import (
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/gpu"
)

// Wire encodes the spec for a remote agent.
func (s Spec) Wire() wire.JobSpec {
	w := wire.JobSpec{
		JobID: s.JobID, Run: s.Run, Command: s.Command, GPUs: s.GPUs,
		SimRemainingMS: s.SimRemaining.Milliseconds(),
		Resources:      s.Resources.wire(),
	}
	if s.Memory != (gpu.SimMemory{}) {
		w.SimMemory = &wire.SimMemory{
			PersistentMiB: s.Memory.PersistentMiB, EphemeralMiB: s.Memory.EphemeralMiB,
			IterationMS: s.Memory.Iteration.Milliseconds(),
		}
	}
	if sh := s.Sharing; sh != nil {
		w.Sharing = &wire.Sharing{Memory: wire.FromEstimate(sh.Memory), DurationS: sh.DurationS, Iterations: sh.Iterations}
	}
	return w
}

// SpecFromWire decodes a spec sent by the server.
func SpecFromWire(w wire.JobSpec) Spec {
	s := Spec{
		JobID: w.JobID, Run: w.Run, Command: w.Command, GPUs: w.GPUs,
		SimRemaining: time.Duration(w.SimRemainingMS) * time.Millisecond,
		Resources:    resourcesFromWire(w.Resources),
	}
	if m := w.SimMemory; m != nil {
		s.Memory = gpu.SimMemory{
			PersistentMiB: m.PersistentMiB, EphemeralMiB: m.EphemeralMiB,
			Iteration: time.Duration(m.IterationMS) * time.Millisecond,
		}
	}
	if sh := w.Sharing; sh != nil {
		s.Sharing = &Sharing{Memory: sh.Memory.Estimate(), DurationS: sh.DurationS, Iterations: sh.Iterations}
	}
	return s
}

// Wire encodes the exit for the server.
func (e Exit) Wire() wire.Exit {
	w := wire.Exit{Node: e.Node, JobID: e.JobID, Run: e.Run, ExitCode: e.ExitCode, Err: e.Err, At: e.At, Infra: e.Infra}
	if e.Requeue != nil {
		r := wire.FromEstimate(*e.Requeue)
		w.Requeue = &r
	}
	if e.Measured != nil {
		m := wire.FromEstimate(*e.Measured)
		w.Measured = &m
	}
	return w
}

// ExitFromWire decodes an exit sent by an agent.
func ExitFromWire(w wire.Exit) Exit {
	e := Exit{Node: w.Node, JobID: w.JobID, Run: w.Run, ExitCode: w.ExitCode, Err: w.Err, At: w.At, Infra: w.Infra}
	if w.Requeue != nil {
		r := w.Requeue.Estimate()
		e.Requeue = &r
	}
	if w.Measured != nil {
		m := w.Measured.Estimate()
		e.Measured = &m
	}
	return e
}
