package salussim

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/trace"
)

// simJob is one job's state in a run.
type simJob struct {
	t      trace.Job
	order  int     // arrival order
	shared bool    // runs in lanes (salus mode, fractional, fits a GPU)
	share  float64 // compute it uses while it runs, of one GPU
	mem    memest.Estimate
	work   float64 // solo work left, seconds

	admitted, finish float64
	done             bool
	gpus             []int // whole-GPU jobs: the GPUs held
	gpu              int   // shared jobs: the GPU

	iterLen, iterLeft float64 // the running iteration's work, and what is left
	ver               int
}

// gpuState is one GPU's jobs and speed.
type gpuState struct {
	hosted  int       // jobs on the GPU, in lanes or holding it
	running []*simJob // shared jobs whose iteration runs
	rate    float64   // progress per second of each running iteration
	last    float64   // when iterLeft was last brought up to date
	dirty   bool
}

// simulator is one run.
type simulator struct {
	cfg     Config
	jobs    []*simJob // arrival order
	byID    map[int64]*simJob
	pool    *lanes.Pool
	gpus    []gpuState
	ev      queue
	waiting []*simJob
	next    int // next arrival
	now     float64

	busy    int // GPUs hosting a job
	busyS   float64
	hostedS float64 // integral of jobs hosted over busy GPUs
	lastT   float64
	res     Result
	started bool
	// unbatched runs a job alone in its lane one IterationS at a time,
	// as the lanes would; by default it runs until another job joins its
	// GPU's lanes, which ends at the same iteration boundaries (a test
	// checks that both give the same figures).
	unbatched bool
}

// Run replays jobs on cfg.GPUs GPUs and reports the outcome. Jobs arrive
// at their submit time, in file order at equal times; waiting jobs are
// started in arrival order, any that fits (skip-ahead), and never
// preempted. It refuses a job with a negative or non-finite time or more
// GPUs than the cluster.
func Run(jobs []trace.Job, cfg Config) (*Result, error) {
	s, err := newSimulator(jobs, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.loop(); err != nil {
		return nil, fmt.Errorf("salussim %s on %d GPUs: %w", s.cfg.Sharing, s.cfg.GPUs, err)
	}
	return s.result(), nil
}

func newSimulator(in []trace.Job, cfg Config) (*simulator, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	caps := make([]int64, cfg.GPUs)
	for i := range caps {
		caps[i] = cfg.GPUMemMiB
	}
	pool, err := lanes.NewPool(caps, cfg.Lanes)
	if err != nil {
		return nil, fmt.Errorf("salussim: %w", err)
	}
	s := &simulator{cfg: cfg, pool: pool, gpus: make([]gpuState, cfg.GPUs), byID: make(map[int64]*simJob, len(in))}
	for i, tj := range in {
		if err := checkJob(tj, cfg.GPUs); err != nil {
			return nil, err
		}
		if _, dup := s.byID[tj.ID]; dup {
			return nil, fmt.Errorf("salussim: job %d twice", tj.ID)
		}
		j := &simJob{t: tj, order: i, work: tj.Duration, share: float64(max(tj.GPUs, 1)), gpu: -1}
		if cfg.Sharing == SharingSalus && fractional(tj) {
			j.share = float64(tj.GPUMilli) / 1000
			j.mem = s.memoryOf(tj)
			if cfg.Lanes.Padding.Apply(j.mem).TotalMiB() <= cfg.GPUMemMiB {
				j.shared = true
			}
		}
		s.jobs = append(s.jobs, j)
		s.byID[tj.ID] = j
	}
	slices.SortStableFunc(s.jobs, func(a, b *simJob) int {
		switch {
		case a.t.Submit < b.t.Submit:
			return -1
		case a.t.Submit > b.t.Submit:
			return 1
		}
		return 0
	})
	for i, j := range s.jobs {
		j.order = i
	}
	return s, nil
}

// fractional reports whether a job asks for part of one GPU.
func fractional(j trace.Job) bool { return j.GPUs == 1 && j.GPUMilli > 0 && j.GPUMilli < 1000 }

// memoryOf derives a fractional job's memory: gpu_milli/1000 of the GPU,
// PersistentShare of it persistent, the rest ephemeral.
func (s *simulator) memoryOf(j trace.Job) memest.Estimate {
	return Memory(j, s.cfg.GPUMemMiB, s.cfg.PersistentShare)
}

func checkJob(j trace.Job, gpus int) error {
	bad := func(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case bad(j.Submit) || bad(j.Duration):
		return fmt.Errorf("salussim: job %d: submit %v, duration %v", j.ID, j.Submit, j.Duration)
	case j.GPUs < 1 || j.GPUs > gpus:
		return fmt.Errorf("salussim: job %d needs %d GPUs, the cluster has %d", j.ID, j.GPUs, gpus)
	}
	return nil
}
