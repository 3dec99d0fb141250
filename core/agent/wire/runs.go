package wire

import (
	"errors"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// FromSpec encodes a run's spec for a remote agent.
func FromSpec(s job.Spec) JobSpec {
	w := JobSpec{
		JobID: s.JobID, Run: s.Run, Command: s.Command, GPUs: s.GPUs,
		SimRemainingMS: s.SimRemaining.Milliseconds(),
		Resources:      FromResources(s.Resources),
		Env:            s.Env, Dir: s.Dir, TimeLeftMS: s.TimeLeft.Milliseconds(),
		Account: s.Account, Image: s.Image, Session: FromSession(s.Session), Name: s.Name,
		Checkpoint: fromCheckpointCopy(s.Checkpoint),
	}
	if g := s.Gang; g != nil {
		w.Gang = &Gang{Rank: g.Rank, MasterPort: g.MasterPort, TasksPerGPU: g.TasksPerGPU}
		for _, n := range g.Nodes {
			w.Gang.Nodes = append(w.Gang.Nodes, GangNode{Name: n.Name, Addr: n.Addr, GPUs: n.GPUs})
		}
	}
	if a := s.Array; a != nil {
		w.Array = &ArrayTask{ID: a.ID, Index: a.Index}
	}
	if s.Memory != (gpu.SimMemory{}) {
		w.SimMemory = &SimMemory{
			PersistentMiB: s.Memory.PersistentMiB, EphemeralMiB: s.Memory.EphemeralMiB,
			IterationMS: s.Memory.Iteration.Milliseconds(), UtilPct: s.Memory.UtilPct,
		}
	}
	if sh := s.Sharing; sh != nil {
		w.Sharing = &Sharing{Memory: FromEstimate(sh.Memory), DurationS: sh.DurationS, Iterations: sh.Iterations}
	}
	return w
}

// Spec decodes a spec sent by the server.
func (w JobSpec) Spec() job.Spec {
	s := job.Spec{
		JobID: w.JobID, Run: w.Run, Command: w.Command, GPUs: w.GPUs,
		SimRemaining: time.Duration(w.SimRemainingMS) * time.Millisecond,
		Resources:    w.Resources.Resources(),
		Env:          w.Env, Dir: w.Dir, TimeLeft: time.Duration(w.TimeLeftMS) * time.Millisecond,
		Account: w.Account, Image: w.Image, Session: w.Session.Session(), Name: w.Name,
		Checkpoint: w.Checkpoint.copy(),
	}
	if g := w.Gang; g != nil {
		s.Gang = &job.Gang{Rank: g.Rank, MasterPort: g.MasterPort, TasksPerGPU: g.TasksPerGPU}
		for _, n := range g.Nodes {
			s.Gang.Nodes = append(s.Gang.Nodes, job.GangNode{Name: n.Name, Addr: n.Addr, GPUs: n.GPUs})
		}
	}
	if a := w.Array; a != nil {
		s.Array = &job.ArrayTask{ID: a.ID, Index: a.Index}
	}
	if m := w.SimMemory; m != nil {
		s.Memory = gpu.SimMemory{
			PersistentMiB: m.PersistentMiB, EphemeralMiB: m.EphemeralMiB,
			Iteration: time.Duration(m.IterationMS) * time.Millisecond, UtilPct: m.UtilPct,
		}
	}
	if sh := w.Sharing; sh != nil {
		s.Sharing = &job.Sharing{Memory: sh.Memory.Estimate(), DurationS: sh.DurationS, Iterations: sh.Iterations}
	}
	return s
}

// FromExit encodes an exit for the server.
func FromExit(e job.Exit) Exit {
	w := Exit{Node: e.Node, JobID: e.JobID, Run: e.Run, ExitCode: e.ExitCode, Err: e.Err, At: e.At, Infra: e.Infra, EndedAs: string(e.EndedAs)}
	if e.Requeue != nil {
		r := FromEstimate(*e.Requeue)
		w.Requeue = &r
	}
	if e.Measured != nil {
		m := FromEstimate(*e.Measured)
		w.Measured = &m
	}
	w.Resume = fromResume(e.Resume)
	w.Checkpoint = fromCheckpointState(e.Checkpoint)
	return w
}

// Exit decodes an exit sent by an agent.
func (w Exit) Exit() job.Exit {
	e := job.Exit{Node: w.Node, JobID: w.JobID, Run: w.Run, ExitCode: w.ExitCode, Err: w.Err, At: w.At, Infra: w.Infra}
	if job.State(w.EndedAs) == job.TimedOut {
		e.EndedAs = job.TimedOut // the one end an agent decides itself
	}
	if w.Requeue != nil {
		r := w.Requeue.Estimate()
		e.Requeue = &r
	}
	if w.Measured != nil {
		m := w.Measured.Estimate()
		e.Measured = &m
	}
	e.Resume = w.Resume.resume()
	e.Checkpoint = w.Checkpoint.state()
	return e
}

// fromResume encodes what a run resumed from; nil stays nil.
func fromResume(r *job.Resume) *Resume {
	if r == nil {
		return nil
	}
	w := &Resume{Run: r.Run, FromRun: r.FromRun, FromNode: r.FromNode}
	if r.Resumed() {
		at := r.CheckpointAt
		w.CheckpointAt = &at
	}
	return w
}

// resume decodes what a run resumed from; nil stays nil.
func (w *Resume) resume() *job.Resume {
	if w == nil {
		return nil
	}
	r := &job.Resume{Run: w.Run, FromRun: w.FromRun, FromNode: w.FromNode}
	if w.CheckpointAt != nil {
		r.CheckpointAt = *w.CheckpointAt
	}
	return r
}

// FromResources encodes an allocation; nil (not limited) stays nil.
func FromResources(r *job.Resources) *Resources {
	if r == nil {
		return nil
	}
	return &Resources{CPUMilli: r.CPUMilli, MemMiB: r.MemMiB, PropCPUMilli: r.PropCPUMilli, ProfileMaxMilli: r.ProfileMaxMilli}
}

// Resources decodes an allocation; nil (not limited) stays nil.
func (w *Resources) Resources() *job.Resources {
	if w == nil {
		return nil
	}
	return &job.Resources{CPUMilli: w.CPUMilli, MemMiB: w.MemMiB, PropCPUMilli: w.PropCPUMilli, ProfileMaxMilli: w.ProfileMaxMilli}
}

// FromUsage encodes jobs' usage for a heartbeat.
func FromUsage(us []job.Usage) []JobUsage {
	if len(us) == 0 {
		return nil
	}
	out := make([]JobUsage, len(us))
	for i, u := range us {
		w := JobUsage{JobID: u.JobID, At: u.At, CPUMilli: u.CPUMilli, MemMiB: u.MemMiB,
			UsedCPUMilli: u.UsedCPUMilli, UsedMemMiB: u.UsedMemMiB, Enforced: u.Enforced, Note: u.Note}
		for _, p := range u.Profile {
			w.Profile = append(w.Profile, ProfilePoint{CPUMilli: p.CPUMilli, Rate: p.Rate})
		}
		w.Resume = fromResume(u.Resume)
		w.Checkpoint = fromCheckpointState(u.Checkpoint)
		out[i] = w
	}
	return out
}

// Usage decodes jobs' usage sent by an agent.
func Usage(ws []JobUsage) []job.Usage {
	out := make([]job.Usage, len(ws))
	for i, w := range ws {
		u := job.Usage{JobID: w.JobID, At: w.At, CPUMilli: w.CPUMilli, MemMiB: w.MemMiB,
			UsedCPUMilli: w.UsedCPUMilli, UsedMemMiB: w.UsedMemMiB, Enforced: w.Enforced, Note: w.Note}
		for _, p := range w.Profile {
			u.Profile = append(u.Profile, job.ProfilePoint{CPUMilli: p.CPUMilli, Rate: p.Rate})
		}
		u.Resume = w.Resume.resume()
		u.Checkpoint = w.Checkpoint.state()
		out[i] = u
	}
	return out
}

// AckError is the answer to a request that failed with err: a refusal
// for the job's Unix account says so in NoAccount.
func AckError(err error) *Ack {
	ack := &Ack{}
	if err == nil {
		return ack
	}
	ack.Error = err.Error()
	var ae *job.AccountError
	if errors.As(err, &ae) {
		ack.NoAccount = &NoAccount{Account: ae.Account, Why: ae.Why}
	}
	return ack
}

// Err is the error an Ack reports for a request to node, nil on success:
// a refusal for the job's Unix account is a *job.AccountError.
func (a *Ack) Err(node string) error {
	switch {
	case a.NoAccount != nil:
		return &job.AccountError{Account: a.NoAccount.Account, Node: node, Why: a.NoAccount.Why}
	case a.Error != "":
		return errors.New(a.Error)
	}
	return nil
}
