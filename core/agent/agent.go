// Package agent runs jobs on one machine: it starts their processes (or
// simulated workloads) on the GPUs the scheduler chose, stops them on
// request with SIGTERM then SIGKILL, keeps their output, and reports how
// they ended.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// Spec is what the agent needs to run one job.
type Spec struct {
	JobID   int64
	Command []string // argv; empty for a simulated job
	// SimRemaining is how long a simulated job still has to run.
	SimRemaining time.Duration
	// Memory is the job's GPU memory on a simulated GPU.
	Memory gpu.SimMemory
	GPUs   []int // indices of this machine's GPUs
}

// Exit reports that a job's run ended.
type Exit struct {
	Node     string
	JobID    int64
	ExitCode int    // -1 when killed by a signal or never started
	Err      string // why it could not start, or the signal that ended it
	At       time.Time
}

// Config sets up a Local agent.
type Config struct {
	Name    string
	Backend gpu.Backend
	WorkDir string        // each job runs in WorkDir/jobs/ID
	Grace   time.Duration // between SIGTERM and SIGKILL
	CPUs    int
	MemMiB  int64
	Logger  *slog.Logger
}

// Local runs jobs on the machine it runs on.
type Local struct {
	cfg   Config
	exits chan<- Exit

	mu   sync.Mutex
	runs map[int64]*run
}

type run struct {
	stop func() // asks the run to end
	done chan struct{}
}

// New returns an agent that reports job exits on exits.
func New(cfg Config, exits chan<- Exit) (*Local, error) {
	if cfg.Name == "" {
		return nil, errors.New("agent: name is empty")
	}
	if cfg.Backend == nil {
		return nil, errors.New("agent: no GPU back end")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(filepath.Join(cfg.WorkDir, "jobs"), 0o750); err != nil {
		return nil, fmt.Errorf("agent %s: work dir: %w", cfg.Name, err)
	}
	return &Local{cfg: cfg, exits: exits, runs: make(map[int64]*run)}, nil
}

// Name is the machine's name.
func (a *Local) Name() string { return a.cfg.Name }

// Devices lists the machine's GPUs.
func (a *Local) Devices() []gpu.Device { return a.cfg.Backend.Devices() }

// Resources returns the machine's CPUs and host memory.
func (a *Local) Resources() (cpus int, memMiB int64) { return a.cfg.CPUs, a.cfg.MemMiB }

// Sample reads every GPU.
func (a *Local) Sample(now time.Time) []gpu.Sample { return a.cfg.Backend.Sample(now) }

// Running lists the jobs whose runs have not ended.
func (a *Local) Running() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]int64, 0, len(a.runs))
	for id := range a.runs {
		ids = append(ids, id)
	}
	return ids
}

// LogPath is where a job's output is kept on this machine.
func (a *Local) LogPath(jobID int64) string {
	return filepath.Join(a.jobDir(jobID), "output.log")
}

func (a *Local) jobDir(jobID int64) string {
	return filepath.Join(a.cfg.WorkDir, "jobs", strconv.FormatInt(jobID, 10))
}

// Start begins a run of the job. The run's end is reported as an Exit.
func (a *Local) Start(ctx context.Context, s Spec) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.runs[s.JobID]; ok {
		return fmt.Errorf("start job %d on %s: already running", s.JobID, a.cfg.Name)
	}
	if err := a.checkGPUs(s.GPUs); err != nil {
		return fmt.Errorf("start job %d on %s: %w", s.JobID, a.cfg.Name, err)
	}
	if err := os.MkdirAll(a.jobDir(s.JobID), 0o750); err != nil {
		return fmt.Errorf("start job %d: work dir: %w", s.JobID, err)
	}
	log, err := os.OpenFile(a.LogPath(s.JobID), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("start job %d: log file: %w", s.JobID, err)
	}
	r := &run{done: make(chan struct{})}
	var wait func() (int, string)
	if len(s.Command) > 0 {
		wait, r.stop, err = a.startProcess(s, log)
	} else {
		wait, r.stop = a.startSim(s, log)
	}
	if err != nil {
		log.Close()
		return fmt.Errorf("start job %d: %w", s.JobID, err)
	}
	if sim, ok := a.cfg.Backend.(*gpu.Sim); ok {
		sim.Attach(s.JobID, s.GPUs, s.Memory, time.Now())
	}
	a.runs[s.JobID] = r
	go func() {
		code, why := wait()
		log.Close()
		if sim, ok := a.cfg.Backend.(*gpu.Sim); ok {
			sim.Detach(s.JobID)
		}
		a.mu.Lock()
		delete(a.runs, s.JobID)
		a.mu.Unlock()
		close(r.done)
		a.exits <- Exit{Node: a.cfg.Name, JobID: s.JobID, ExitCode: code, Err: why, At: time.Now()}
	}()
	return nil
}

func (a *Local) checkGPUs(gpus []int) error {
	n := len(a.cfg.Backend.Devices())
	for _, g := range gpus {
		if g < 0 || g >= n {
			return fmt.Errorf("no GPU %d (the machine has %d)", g, n)
		}
	}
	return nil
}

// Stop ends a run: SIGTERM, then SIGKILL after the grace period. It
// returns at once; the Exit follows. Stopping a job that is not running
// is not an error.
func (a *Local) Stop(ctx context.Context, jobID int64) error {
	a.mu.Lock()
	r, ok := a.runs[jobID]
	a.mu.Unlock()
	if ok {
		r.stop()
	}
	return nil
}

// Shutdown stops every run and waits for them to end or ctx to expire.
func (a *Local) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	runs := make([]*run, 0, len(a.runs))
	for _, r := range a.runs {
		runs = append(runs, r)
	}
	a.mu.Unlock()
	for _, r := range runs {
		r.stop()
	}
	for _, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
			return fmt.Errorf("agent %s shutdown: %w", a.cfg.Name, ctx.Err())
		}
	}
	return nil
}
