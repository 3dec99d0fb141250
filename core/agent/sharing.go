package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/gate"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

// The environment variables a job that opted in finds.
const (
	// GateEnv is the path of the gate's socket.
	GateEnv = "GPUPORTAL_GATE"
	// GateTokenEnv is the secret the job presents to the gate, new for
	// each run.
	GateTokenEnv = "GPUPORTAL_GATE_TOKEN"
)

// gateSocket is the gate's socket in the work folder.
const gateSocket = "gate.sock"

// startGate serves the gate on WorkDir/gate.sock with the lanes of every
// GPU of the machine.
func (a *Local) startGate(cfg lanes.Config) error {
	devs := a.cfg.Backend.Devices()
	caps := make([]int64, len(devs))
	for i, d := range devs {
		caps[i] = d.MemMiB
	}
	g, err := gate.Listen(gate.Config{
		Path:          filepath.Join(a.cfg.WorkDir, gateSocket),
		CapacitiesMiB: caps,
		Lanes:         cfg,
		Authorize:     a.authorizeGate,
		Stop:          a.stopForGate,
		Logger:        a.cfg.Logger.With("part", "gate"),
	})
	if err != nil {
		return fmt.Errorf("agent %s: %w", a.cfg.Name, err)
	}
	a.gate = g
	return nil
}

// joinGate admits a job that opted in to the gate and returns
// the environment variables that tell it where the gate is; none for
// other jobs, or when the agent serves no gate (the job then runs
// unshared: the Python client does nothing without GPUPORTAL_GATE).
func (a *Local) joinGate(s job.Spec) ([]string, error) {
	if s.Sharing == nil {
		return nil, nil
	}
	if a.gate == nil {
		a.cfg.Logger.Warn("job opted in to sharing, but this agent serves no gate: it runs unshared", "job", s.JobID)
		return nil, nil
	}
	token, err := a.gate.Add(gate.Job{
		ID: s.JobID, GPUs: s.GPUs, Memory: s.Sharing.Memory,
		DurationS: s.Sharing.DurationS, Iterations: s.Sharing.Iterations,
	})
	if err != nil {
		return nil, err
	}
	if len(s.Command) == 0 {
		return nil, nil // a simulated job iterates in process (simshare.go)
	}
	return []string{GateEnv + "=" + a.gate.Path(), GateTokenEnv + "=" + token}, nil
}

// measured is the job's estimate as the gate corrected it from its
// peaks, unpadded; nil without a gate or with too few peaks.
func (a *Local) measured(jobID int64) *memest.Estimate {
	if a.gate == nil {
		return nil
	}
	if est, ok := a.gate.Measured(jobID); ok {
		return &est
	}
	return nil
}

// leaveGate releases the job's lanes, if it had any.
func (a *Local) leaveGate(jobID int64) {
	if a.gate != nil {
		a.gate.Remove(jobID)
	}
}

// authorizeGate accepts a connection to the gate only from a process in
// the job's process group: a token that leaked is no use elsewhere.
func (a *Local) authorizeGate(jobID int64, pid int) error {
	if pid <= 0 {
		return errors.New("cannot tell which process connected")
	}
	pg, err := a.pgidOf(pid)
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	a.mu.Lock()
	r, ok := a.runs[jobID]
	var ns uint64
	if ok {
		ns = r.pidns
	}
	a.mu.Unlock()
	if ok && r.container != "" {
		// A container job's processes are those of its PID namespace.
		if pns, err := pidNamespace(pid); err != nil || ns == 0 || pns != ns {
			return fmt.Errorf("process %d is not in job %d's container", pid, jobID)
		}
		return nil
	}
	if !ok || r.pgid <= 0 || r.pgid != pg {
		return fmt.Errorf("process %d, in process group %d, is not one of job %d's", pid, pg, jobID)
	}
	return nil
}

// stopForGate stops a job that outgrew its lane; its output and its
// Exit say so, and the Exit carries the estimate to run it again with.
func (a *Local) stopForGate(jobID int64, err *gate.ExceededError) {
	a.mu.Lock()
	r, ok := a.runs[jobID]
	var stop func()
	if ok {
		if r.exceeded == nil {
			r.exceeded = err
		}
		stop = r.stop
	}
	a.mu.Unlock()
	if !ok {
		return
	}
	a.cfg.Logger.Warn("stopping a job that outgrew its lane", "job", jobID, "err", err)
	if f, ferr := os.OpenFile(a.LogPath(jobID), os.O_APPEND|os.O_WRONLY, 0); ferr == nil {
		fmt.Fprintf(f, "%s gpuportal: stopping the job: %v\n", time.Now().Format(time.RFC3339), err)
		f.Close()
	}
	stop()
}

// Lanes returns the lanes of the machine's GPUs as the gate holds them
// (which jobs, their P and E, who runs an iteration now); nil when the
// agent serves no gate.
func (a *Local) Lanes() []lanes.GPUView {
	if a.gate == nil {
		return nil
	}
	return a.gate.View()
}
