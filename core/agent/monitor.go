package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// Monitor-only mode (gpuportal agent --monitor-only) is for machines whose
// jobs another system runs, such as Slurm's nodes under serve --executor
// slurm: the agent samples the GPUs and streams the samples to the
// server, and refuses to start jobs. It finds the gpuportal job of each
// GPU process in the process's environment (GPUPORTAL_JOB_ID, which the
// Slurm executor gives every job), so that a job's memory timeline is its
// processes' memory there too.

// ErrMonitorOnly is why a monitor-only agent refuses to start a job.
var ErrMonitorOnly = errors.New("this agent is monitor-only (--monitor-only): it watches the GPUs and starts no jobs")

// jobIDEnv names, in a job's environment, the gpuportal job it belongs to.
const jobIDEnv = "GPUPORTAL_JOB_ID"

// MonitorOnly reports whether the agent only watches its GPUs.
func (a *Local) MonitorOnly() bool { return a.cfg.MonitorOnly }

// monitorSample reads every GPU, counting the memory of each process whose
// environment names a gpuportal job as that job's.
func (a *Local) monitorSample(now time.Time) []gpu.Sample {
	ss := a.cfg.Backend.Sample(now)
	for i := range ss {
		attributeByEnv(&ss[i], func(pid int) (int64, bool) { return jobOfProcess(a.cfg.ProcDir, pid) })
	}
	return ss
}

// attributeByEnv moves the memory of s's processes that belong to a job
// (jobOf) into s.Jobs.
func attributeByEnv(s *gpu.Sample, jobOf func(pid int) (int64, bool)) {
	if len(s.Processes) == 0 {
		return
	}
	byPID := make(map[int]int64)
	for _, p := range s.Processes {
		if id, ok := jobOf(p.PID); ok {
			byPID[p.PID] = id
		}
	}
	// Each process is its own "group" here.
	attributeProcesses(s, byPID, func(pid int) (int, error) { return pid, nil })
}

// jobOfProcess reads the gpuportal job of a process from its environment
// under procDir (default /proc). A process the agent may not read (another
// user's, unless the agent runs as root) belongs to no job: its memory
// counts for the GPU only.
func jobOfProcess(procDir string, pid int) (int64, bool) {
	if procDir == "" {
		procDir = "/proc"
	}
	env, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "environ"))
	if err != nil {
		return 0, false
	}
	prefix := []byte(jobIDEnv + "=")
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			id, err := strconv.ParseInt(string(v), 10, 64)
			return id, err == nil && id > 0
		}
	}
	return 0, false
}

// refuseMonitorOnly is Start's answer on a monitor-only agent.
func (a *Local) refuseMonitorOnly(jobID int64) error {
	return fmt.Errorf("start job %d on %s: %w", jobID, a.cfg.Name, ErrMonitorOnly)
}
