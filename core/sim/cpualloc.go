package sim

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/sim/synergysim"
)

// Default CPUs and host memory per GPU of a simulated node that declares
// none (a NODESxGPUS cluster): the Synergy paper's server, 8 GPUs with 24
// cores and 500 GB, so 3 cores and 62.5 GiB per GPU.
const (
	defaultCPUsPerGPU   = 3
	defaultMemMiBPerGPU = 64000
)

// CPUResult is how CPUs and host memory were allocated over a run, when
// the run modelled them (Config.Sched.CPUAlloc set).
type CPUResult struct {
	// Mode is sched.AllocProportional or sched.AllocSynergy.
	Mode string `json:"mode"`
	// CPUAllocated is the time-averaged fraction of the cluster's cores
	// handed to jobs, from the first submit to the last finish.
	CPUAllocated float64 `json:"cpu_allocated"`
	// CPUUseful is the fraction jobs could use: each job's cores capped
	// where its CPU curve stops rising (all of them for a job without a
	// CPU curve).
	CPUUseful float64 `json:"cpu_useful"`
	// MemAllocated is the time-averaged fraction of host memory handed
	// to jobs.
	MemAllocated float64 `json:"mem_allocated"`
	// AvgSpeedup is running jobs' speed over their proportional speed,
	// averaged over job running time (1 in proportional mode).
	AvgSpeedup float64 `json:"avg_speedup"`
}

// cpuState models each node's CPUs and memory: which job holds how much
// (by sched.AllocateNodes), so that a job runs at its profile's speed
// relative to its proportional share.
type cpuState struct {
	mode   string
	nodes  map[string]*sched.Node
	total  struct{ cpu, mem float64 }
	byNode map[string][]*job // running jobs per node
	dirty  map[string]bool   // nodes whose jobs changed since the last allocation

	// Current sums, and their integrals over time since first.
	cpuNow, usefulNow, memNow float64
	cpuInt, usefulInt, memInt float64
	speedInt, runInt          float64
	first, last               float64
	started                   bool
}

// newCPUState sets up CPU modelling for mode on nodes, filling in the
// default CPUs and memory of nodes that declare neither (in place: the
// scheduler sees the same nodes).
func newCPUState(mode string, nodes []sched.Node) (*cpuState, error) {
	switch mode {
	case sched.AllocProportional, sched.AllocSynergy:
	default:
		return nil, fmt.Errorf("CPU allocation %q: want %s or %s", mode, sched.AllocProportional, sched.AllocSynergy)
	}
	c := &cpuState{mode: mode, nodes: map[string]*sched.Node{}, byNode: map[string][]*job{}, dirty: map[string]bool{}}
	for i := range nodes {
		n := &nodes[i]
		if n.CPUs == 0 && n.MemMiB == 0 {
			n.CPUs = defaultCPUsPerGPU * len(n.GPUs)
			n.MemMiB = defaultMemMiBPerGPU * int64(len(n.GPUs))
		}
		c.nodes[n.Name] = n
		c.total.cpu += float64(n.CPUs) * 1000
		c.total.mem += float64(n.MemMiB)
	}
	return c, nil
}

// resolveProfiles gives every job its sensitivity profile, which the
// scheduler's snapshot points to.
func resolveProfiles(jobs []job) error {
	cpus := make([]jobCPU, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		p, src, err := synergysim.TraceProfile(*j.tj, nil)
		if err != nil {
			return err
		}
		j.cpu = &cpus[i]
		j.cpu.profile, j.cpu.profileSrc = p, src
	}
	return nil
}

// advance adds the current allocation's time up to t to the integrals.
func (c *cpuState) advance(t float64, running []*job) {
	if !c.started {
		c.first, c.last, c.started = t, t, true
	}
	dt := t - c.last
	if dt > 0 {
		c.cpuInt += dt * c.cpuNow
		c.usefulInt += dt * c.usefulNow
		c.memInt += dt * c.memNow
		for _, j := range running {
			c.speedInt += dt * j.rate()
			c.runInt += dt
		}
	}
	c.last = max(c.last, t)
}

// place records that j now runs on its GPUs' nodes, or no longer does.
func (c *cpuState) place(j *job, gpus []gpu.Ref, on bool) {
	seen := ""
	for _, g := range gpus {
		if g.Node == seen {
			continue
		}
		seen = g.Node
		list := c.byNode[g.Node]
		k := -1
		for i, o := range list {
			if o == j {
				k = i
				break
			}
		}
		switch {
		case on && k < 0:
			c.byNode[g.Node] = append(list, j)
		case !on && k >= 0:
			c.byNode[g.Node] = append(list[:k:k], list[k+1:]...)
		}
		c.dirty[g.Node] = true
	}
	if !on {
		c.release(j)
		j.cpu.alloc = nil
		j.cpu.speed = 0
	}
}

// speedChange is a running job's new speed after a reallocation.
type speedChange struct {
	j     *job
	speed float64
}

// reallocate allocates the changed nodes anew (in name order, so runs
// are reproducible) and returns the running jobs whose speed changes.
func (c *cpuState) reallocate() []speedChange {
	if len(c.dirty) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(c.dirty))
	var changed []speedChange
	for _, name := range names {
		delete(c.dirty, name)
		n := c.nodes[name]
		if n == nil {
			continue
		}
		list := c.byNode[name]
		snap := make([]sched.Job, len(list))
		for i, j := range list {
			// A trace's CPU and memory requests only guide the profile
			// (synergysim.TraceProfile), they are no floors: most ask for
			// the proportional share, which would pin every job to it.
			snap[i] = sched.Job{ID: j.tj.ID, GPUs: j.tj.GPUs, State: sched.Running, Placement: j.gpus,
				CPUProfile: &j.cpu.profile, CPUProfileSource: j.cpu.profileSrc}
		}
		as := sched.AllocateNodes(c.mode, []sched.Node{*n}, snap)
		byID := make(map[int64]sched.Allocation, len(as))
		for _, a := range as {
			byID[a.JobID] = a
		}
		for _, j := range list {
			a := byID[j.tj.ID]
			old, had := j.setAlloc(a)
			if had {
				c.cpuNow -= float64(old.CPUMilli)
				c.memNow -= float64(old.MemMiB)
				c.usefulNow -= j.useful(old)
			}
			c.cpuNow += float64(a.CPUMilli)
			c.memNow += float64(a.MemMiB)
			c.usefulNow += j.useful(a)
			if s := j.allocSpeed(); s != j.rate() {
				changed = slices.DeleteFunc(changed, func(c speedChange) bool { return c.j == j })
				changed = append(changed, speedChange{j, s})
			}
		}
	}
	return changed
}

// release takes a job that stops running out of the current sums.
func (c *cpuState) release(j *job) {
	for _, a := range j.cpu.alloc {
		c.cpuNow -= float64(a.CPUMilli)
		c.memNow -= float64(a.MemMiB)
		c.usefulNow -= j.useful(a)
	}
}

// result sums the run up over [first, end].
func (c *cpuState) result(end float64) *CPUResult {
	r := &CPUResult{Mode: c.mode, AvgSpeedup: 1}
	if span := end - c.first; span > 0 {
		r.CPUAllocated = c.cpuInt / (span * c.total.cpu)
		r.CPUUseful = c.usefulInt / (span * c.total.cpu)
		r.MemAllocated = c.memInt / (span * c.total.mem)
	}
	if c.runInt > 0 {
		r.AvgSpeedup = c.speedInt / c.runInt
	}
	return r
}

// setAlloc replaces the job's allocation on a's node, returning the old.
func (j *job) setAlloc(a sched.Allocation) (sched.Allocation, bool) {
	for i, o := range j.cpu.alloc {
		if o.Node == a.Node {
			j.cpu.alloc[i] = a
			return o, true
		}
	}
	j.cpu.alloc = append(j.cpu.alloc, a)
	return sched.Allocation{}, false
}

// allocSpeed is the job's speed relative to its proportional share: the
// slowest of its nodes.
func (j *job) allocSpeed() float64 {
	s := math.Inf(1)
	for _, a := range j.cpu.alloc {
		r := 1.0
		if a.PropSpeed > 0 {
			r = a.Speed / a.PropSpeed
		}
		s = min(s, r)
	}
	if math.IsInf(s, 1) || s <= 0 {
		return 1
	}
	return s
}

// useful is the part of a's cores the job can use: up to where its CPU
// curve stops rising.
func (j *job) useful(a sched.Allocation) float64 {
	if len(j.cpu.profile.CPU) == 0 {
		return float64(a.CPUMilli)
	}
	return math.Min(float64(a.CPUMilli), math.Ceil(j.cpu.profile.CPU.Saturation()*float64(a.GPUs)*1000))
}

// rate is the job's speed relative to its trace duration: 1 unless CPUs
// are modelled and its allocation makes it faster.
func (j *job) rate() float64 {
	if j.cpu != nil && j.cpu.speed > 0 {
		return j.cpu.speed
	}
	return 1
}

// applySpeeds reallocates the nodes whose jobs changed and moves the
// completions of the jobs whose speed changes. A no-op without CPU
// modelling.
func (s *simulator) applySpeeds() {
	if s.cpu == nil {
		return
	}
	for _, ch := range s.cpu.reallocate() {
		j := ch.j
		if !j.running {
			continue
		}
		// Close the run so far at the old speed, then go on at the new.
		ran := s.now - j.runStart
		j.account(ran)
		s.busy += float64(j.tj.GPUs) * ran
		j.runStart = s.now
		j.cpu.speed = ch.speed
		j.run++
		s.ends.push(completion{at: s.now + j.remaining(), job: j, run: j.run})
	}
}

// modelCPUs turns on CPU modelling when Config.Sched.CPUAlloc is set:
// every job gets its profile, nodes their default CPUs and memory.
func (s *simulator) modelCPUs() error {
	mode := s.cfg.Sched.CPUAlloc
	if mode == "" {
		return nil
	}
	if s.cfg.Sched.Placement == sched.PlaceCount {
		return fmt.Errorf("CPU allocation %s needs nodes placement: count placement puts jobs on no node", mode)
	}
	c, err := newCPUState(mode, s.nodes)
	if err != nil {
		return err
	}
	if err := resolveProfiles(s.jobs); err != nil {
		return err
	}
	s.cpu = c
	return nil
}

// writeCPUTable prints, for runs that modelled CPUs, one row per policy.
func writeCPUTable(w io.Writer, results []*Result) error {
	if !slices.ContainsFunc(results, func(r *Result) bool { return r.CPU != nil }) {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcpu alloc\tavg JCT s\tCPU allocated\tCPU useful\tmemory allocated\tavg speedup\t")
	for _, r := range results {
		if c := r.CPU; c != nil {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t\n",
				r.Policy, c.Mode, r.AvgJCT, c.CPUAllocated, c.CPUUseful, c.MemAllocated, c.AvgSpeedup)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}
