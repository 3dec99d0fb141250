// Package synergysim is Synergy's own simulation (docs/synergy.md): a
// trace's jobs with their CPU and memory profiles (from the trace's
// curves, models or requests), placed first come first served on
// simulated nodes and given CPUs and memory proportionally or by
// synergy.Allocate, as the Synergy paper's simulator does. It reads
// traces, so it lives beside core/sim; core/synergy, which the scheduling
// core imports, keeps the pure part: profiles and allocation.
package synergysim

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/trace"
)

// Mode names how a simulation gives CPUs and memory to jobs.
type Mode string

// The allocation modes Simulate compares.
const (
	ModeProportional Mode = "proportional"
	ModeSynergy      Mode = "synergy"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeProportional, ModeSynergy:
		return m, nil
	}
	return "", fmt.Errorf("unknown CPU allocation mode %q (known: proportional, synergy)", s)
}

// SimJob is one job of a simulation.
type SimJob struct {
	ID     int64
	Submit float64
	// Duration is how long the job ran in the trace; the simulation takes
	// it to be its run time at the proportional share of a simulated
	// node, as the Synergy paper's simulator does.
	Duration float64
	GPUs     int
	Profile  synergy.Profile
}

// JobsFromTrace turns a trace's jobs into simulation jobs. A job with a
// model name gets its profile from h or the catalogue (Resolve); one
// without gets the family FamilyForRequest guesses from its CPU and
// memory request, and the flat profile when it requested neither.
// Fractional GPU pods count as one GPU.
func JobsFromTrace(tr *trace.Trace, h *synergy.History) []SimJob {
	out := make([]SimJob, 0, len(tr.Jobs))
	for _, j := range tr.Jobs {
		var p synergy.Profile
		switch {
		case j.Model != "":
			p, _ = synergy.Resolve(nil, h, j.Model, 0)
		case j.CPUMilli > 0 || j.MemMiB > 0:
			p = catalogued(synergy.FamilyForRequest(j.GPUs, j.CPUMilli, j.MemMiB))
		default:
			p = catalogued(synergy.FamilyInsensitive)
		}
		out = append(out, SimJob{ID: j.ID, Submit: j.Submit, Duration: j.Duration, GPUs: max(j.GPUs, 1), Profile: p})
	}
	return out
}

// SimConfig describes the simulated cluster: Nodes identical nodes.
type SimConfig struct {
	Nodes int
	Node  synergy.NodeResources
	Mode  Mode
	// Options tune Allocate in ModeSynergy.
	Options synergy.Options
}

// SimResult sums a simulation up.
type SimResult struct {
	Mode Mode
	Jobs int
	// AvgJCT is the mean of finish minus submit, seconds.
	AvgJCT float64
	// Makespan is from the first submit to the last finish, seconds.
	Makespan float64
	// CPUAllocated is the time-averaged fraction of the cluster's cores
	// handed to jobs; CPUUseful the fraction jobs could use (what they
	// hold, capped at the point where their CPU curve stops rising).
	CPUAllocated float64
	CPUUseful    float64
	// MemAllocated is the time-averaged fraction of host memory handed
	// to jobs.
	MemAllocated float64
	// AvgSpeedup is the mean over running time of job speed relative to
	// the job's proportional speed (1 in ModeProportional).
	AvgSpeedup float64
}

// part is a job's share of one node.
type part struct {
	node, gpus int
}

// simRun is a job being simulated.
type simRun struct {
	job       SimJob
	work      float64 // seconds at speed 1
	remaining float64
	speed     float64
	propSpeed float64
	parts     []part
	finish    float64
}

// Simulate replays jobs on cfg's cluster and reports JCT and utilization.
// Placement is GPU-only and first-come first-served with skip-ahead: a
// job that does not fit waits while later jobs that fit start; a job goes
// to the node with the fewest free GPUs that holds it whole, or else
// across the nodes with the most free GPUs. Jobs are never preempted.
// After every arrival and completion each node's CPUs and memory are
// allocated anew (proportionally or by Allocate) and every job runs at
// its profile's speed, the slowest of its parts for a multi-node job.
func Simulate(cfg SimConfig, jobs []SimJob) (SimResult, error) {
	if cfg.Nodes <= 0 || cfg.Node.GPUs <= 0 {
		return SimResult{}, fmt.Errorf("simulate: need at least one node with GPUs, have %d nodes of %d GPUs", cfg.Nodes, cfg.Node.GPUs)
	}
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return SimResult{}, fmt.Errorf("simulate: %w", err)
	}
	if len(jobs) == 0 {
		return SimResult{}, errors.New("simulate: no jobs")
	}
	runs := make([]*simRun, len(jobs))
	for i, j := range jobs {
		if j.GPUs > cfg.Nodes*cfg.Node.GPUs {
			return SimResult{}, fmt.Errorf("simulate: job %d needs %d GPUs, the cluster has %d", j.ID, j.GPUs, cfg.Nodes*cfg.Node.GPUs)
		}
		if err := j.Profile.Validate(); err != nil {
			return SimResult{}, fmt.Errorf("simulate: job %d: %w", j.ID, err)
		}
		r := &simRun{job: j}
		// The trace's duration is the run time at the proportional share.
		c, m := synergy.ProportionalShare(cfg.Node, synergy.JobDemand{GPUs: min(j.GPUs, cfg.Node.GPUs)})
		r.propSpeed = j.Profile.Speed(min(j.GPUs, cfg.Node.GPUs), c, m)
		r.work = j.Duration * r.propSpeed
		r.remaining = r.work
		runs[i] = r
	}
	sort.SliceStable(runs, func(a, b int) bool { return runs[a].job.Submit < runs[b].job.Submit })

	s := &simState{cfg: cfg, free: make([]int, cfg.Nodes), onNode: make([][]*simRun, cfg.Nodes)}
	for n := range s.free {
		s.free[n] = cfg.Node.GPUs
	}
	start := runs[0].job.Submit
	now, next := start, 0
	var pending, running []*simRun
	var sumJCT float64
	done := 0
	for done < len(runs) {
		// The next event: an arrival or the first completion.
		tArr, tFin := math.Inf(1), math.Inf(1)
		if next < len(runs) {
			tArr = runs[next].job.Submit
		}
		for _, r := range running {
			if r.speed > 0 {
				tFin = math.Min(tFin, now+r.remaining/r.speed)
			}
		}
		t := math.Min(tArr, tFin)
		if math.IsInf(t, 1) {
			return SimResult{}, fmt.Errorf("simulate: stuck at t=%v with %d pending and %d running jobs", now, len(pending), len(running))
		}
		s.account(t-now, running)
		for _, r := range running {
			r.remaining -= r.speed * (t - now)
		}
		now = t
		// Completions (within a rounding of the event time).
		kept := running[:0]
		for _, r := range running {
			if r.remaining <= 1e-6*math.Max(1, r.work) {
				r.finish = now
				sumJCT += now - r.job.Submit
				done++
				s.release(r)
				continue
			}
			kept = append(kept, r)
		}
		running = kept
		for next < len(runs) && runs[next].job.Submit <= now {
			pending = append(pending, runs[next])
			next++
		}
		// First come, first served, with skip-ahead.
		waiting := pending[:0]
		for _, r := range pending {
			if s.place(r) {
				running = append(running, r)
				continue
			}
			waiting = append(waiting, r)
		}
		pending = waiting
		s.allocate()
	}
	res := SimResult{Mode: cfg.Mode, Jobs: len(runs), AvgJCT: sumJCT / float64(len(runs)), Makespan: now - start}
	if now > start {
		total := now - start
		res.CPUAllocated = s.cpuAlloc / (total * float64(cfg.Nodes) * float64(cfg.Node.CPUMilli))
		res.CPUUseful = s.cpuUseful / (total * float64(cfg.Nodes) * float64(cfg.Node.CPUMilli))
		res.MemAllocated = s.memAlloc / (total * float64(cfg.Nodes) * float64(cfg.Node.MemMiB))
	}
	if s.runTime > 0 {
		res.AvgSpeedup = s.speedupTime / s.runTime
	}
	return res, nil
}

// simState is the cluster during a simulation.
type simState struct {
	cfg    SimConfig
	free   []int
	onNode [][]*simRun
	// alloc[node][i] is the allocation of onNode[node][i].
	alloc [][]synergy.Allocation
	// Integrals over time for the utilization figures.
	cpuAlloc, cpuUseful, memAlloc float64
	speedupTime, runTime          float64
}

// place finds GPUs for r, or reports that none fit now.
func (s *simState) place(r *simRun) bool {
	need := r.job.GPUs
	best := -1
	for n, f := range s.free {
		if f >= need && (best < 0 || f < s.free[best]) {
			best = n
		}
	}
	if best >= 0 {
		r.parts = []part{{best, need}}
	} else {
		total := 0
		for _, f := range s.free {
			total += f
		}
		if total < need {
			return false
		}
		order := make([]int, len(s.free))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return s.free[order[a]] > s.free[order[b]] })
		r.parts = nil
		for _, n := range order {
			if need == 0 {
				break
			}
			take := min(need, s.free[n])
			if take > 0 {
				r.parts = append(r.parts, part{n, take})
				need -= take
			}
		}
	}
	for _, p := range r.parts {
		s.free[p.node] -= p.gpus
		s.onNode[p.node] = append(s.onNode[p.node], r)
	}
	return true
}

// release frees r's GPUs.
func (s *simState) release(r *simRun) {
	for _, p := range r.parts {
		s.free[p.node] += p.gpus
		list := s.onNode[p.node]
		for i, o := range list {
			if o == r {
				s.onNode[p.node] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
	}
}

// allocate decides every node's CPUs and memory and sets each running
// job's speed to the slowest of its parts.
func (s *simState) allocate() {
	s.alloc = make([][]synergy.Allocation, len(s.onNode))
	speed := map[*simRun]float64{}
	for n, list := range s.onNode {
		demands := make([]synergy.JobDemand, len(list))
		for i, r := range list {
			demands[i] = synergy.JobDemand{ID: r.job.ID, GPUs: partGPUs(r, n), Profile: r.job.Profile}
		}
		var as []synergy.Allocation
		if s.cfg.Mode == ModeSynergy {
			as = synergy.AllocateWith(s.cfg.Node, demands, s.cfg.Options)
		} else {
			as = synergy.Proportional(s.cfg.Node, demands)
		}
		s.alloc[n] = as
		for i, r := range list {
			if v, ok := speed[r]; !ok || as[i].Speed < v {
				speed[r] = as[i].Speed
			}
		}
	}
	for r, v := range speed {
		r.speed = v
	}
}

func partGPUs(r *simRun, node int) int {
	for _, p := range r.parts {
		if p.node == node {
			return p.gpus
		}
	}
	return 0
}

// account adds dt seconds of the current allocation to the integrals.
func (s *simState) account(dt float64, running []*simRun) {
	if dt <= 0 {
		return
	}
	for n, list := range s.onNode {
		for i, r := range list {
			a := s.alloc[n][i]
			g := partGPUs(r, n)
			useful := float64(min(a.CPUMilli, int64(math.Ceil(r.job.Profile.CPU.Saturation()*float64(g)*1000))))
			if len(r.job.Profile.CPU) == 0 {
				useful = float64(a.CPUMilli) // no curve: count it all as used
			}
			s.cpuAlloc += dt * float64(a.CPUMilli)
			s.cpuUseful += dt * useful
			s.memAlloc += dt * float64(a.MemMiB)
		}
	}
	for _, r := range running {
		if r.propSpeed > 0 {
			s.speedupTime += dt * r.speed / r.propSpeed
			s.runTime += dt
		}
	}
}
