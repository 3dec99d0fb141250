package sched

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/synergy"
)

// CPU and host memory allocation modes (Config.CPUAlloc).
const (
	// AllocProportional gives each job its GPUs' share of its node's CPUs
	// and memory: the common practice, and the default.
	AllocProportional = "proportional"
	// AllocSynergy starts from the proportional share and moves CPUs and
	// memory from insensitive to sensitive jobs on the same node, never
	// leaving a job slower than its share would make it (Synergy, OSDI'22;
	// see core/synergy and docs/scheduling.md).
	AllocSynergy = "synergy"
)

// CPUAllocModes lists the values Config.CPUAlloc accepts besides "".
func CPUAllocModes() []string { return []string{AllocProportional, AllocSynergy} }

// checkCPUAlloc validates Config.CPUAlloc and fills in the default.
func checkCPUAlloc(mode string) (string, error) {
	switch mode {
	case "":
		return AllocProportional, nil
	case AllocProportional, AllocSynergy:
		return mode, nil
	}
	return "", fmt.Errorf("unknown CPU allocation %q (known: %s, %s)", mode, AllocProportional, AllocSynergy)
}

// Allocation is the CPUs and host memory one job gets on one node it runs
// on (a job spread over nodes has one per node), and why.
type Allocation struct {
	JobID int64
	Node  string
	// GPUs is how many of the job's GPUs are on Node.
	GPUs int
	// CPUMilli (thousandths of a core) and MemMiB are what the job gets.
	CPUMilli int64
	MemMiB   int64
	// PropCPUMilli and PropMemMiB are its proportional share.
	PropCPUMilli int64
	PropMemMiB   int64
	// Speed is the job's speed under this allocation according to its
	// profile (1 is its best); PropSpeed under the proportional share.
	// Speed >= PropSpeed always.
	Speed     float64
	PropSpeed float64
	// Profile names where the job's profile came from ("declared",
	// "history", "catalogue", "none") and its family.
	Profile string
	// Reason says in a sentence why the job got what it got.
	Reason string
}

// JobProfile is the sensitivity profile the allocation step uses for j:
// j.CPUProfile when set, else the catalogue's for j.Model's family, else
// the flat profile (SourceNone: the job then keeps its proportional
// share); and where it came from.
func JobProfile(j *Job) (synergy.Profile, synergy.Source) {
	if j.CPUProfile != nil {
		src := j.CPUProfileSource
		if src == "" {
			src = synergy.SourceDeclared
		}
		return *j.CPUProfile, src
	}
	return synergy.Resolve(nil, nil, j.Model, 0)
}

// AllocateNodes divides the CPUs and memory of nodes among the running
// jobs placed on them (State Running; Placement says where), by mode: in
// proportion to GPUs, or by sensitivity (synergy.Allocate). Jobs placed
// on no node of nodes are left out; nodes that declare neither CPUs nor
// memory are skipped. The result is sorted by job ID, then node name, and
// does not depend on the order of nodes or jobs. An unknown mode counts as
// proportional (Config has checked it).
func AllocateNodes(mode string, nodes []Node, jobs []Job) []Allocation {
	type on struct {
		job  int
		gpus int
	}
	idx := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if n.CPUs > 0 || n.MemMiB > 0 {
			idx[n.Name] = i
		}
	}
	perNode := make([][]on, len(nodes))
	for ji := range jobs {
		j := &jobs[ji]
		if !j.holds() {
			continue
		}
		for _, g := range j.Placement {
			ni, ok := idx[g.Node]
			if !ok {
				continue
			}
			list := perNode[ni]
			if k := len(list) - 1; k >= 0 && list[k].job == ji {
				list[k].gpus++
			} else if k := slices.IndexFunc(list, func(o on) bool { return o.job == ji }); k >= 0 {
				list[k].gpus++
			} else {
				list = append(list, on{job: ji, gpus: 1})
			}
			perNode[ni] = list
		}
	}
	var out []Allocation
	for ni, list := range perNode {
		if len(list) == 0 {
			continue
		}
		n := &nodes[ni]
		// Ties in synergy.Allocate go to the earlier job: order by ID.
		slices.SortFunc(list, func(a, b on) int { return cmp.Compare(jobs[a.job].ID, jobs[b.job].ID) })
		res := synergy.NodeResources{Name: n.Name, GPUs: len(n.GPUs), CPUMilli: int64(n.CPUs) * 1000, MemMiB: n.MemMiB}
		demands := make([]synergy.JobDemand, len(list))
		sources := make([]string, len(list))
		for k, o := range list {
			j := &jobs[o.job]
			p, src := JobProfile(j)
			sources[k] = fmt.Sprintf("%s (%s)", src, cmp.Or(p.Family, "flat"))
			// What the job asked for is a floor, split over its nodes.
			share := func(v int64) int64 { return v * int64(o.gpus) / int64(max(j.GPUs, o.gpus, 1)) }
			demands[k] = synergy.JobDemand{ID: j.ID, GPUs: o.gpus, Profile: p,
				MinCPUMilli: share(j.CPUMilli), MinMemMiB: share(j.MemMiB)}
			if src == synergy.SourceNone {
				// Nothing is known: the job keeps its proportional share
				// (the floors are capped at it) rather than being taken
				// for insensitive.
				demands[k].MinCPUMilli, demands[k].MinMemMiB = res.CPUMilli, res.MemMiB
			}
		}
		var as []synergy.Allocation
		if mode == AllocSynergy {
			as = synergy.Allocate(res, demands)
		} else {
			as = synergy.Proportional(res, demands)
		}
		for k, a := range as {
			out = append(out, Allocation{JobID: a.ID, Node: n.Name, GPUs: list[k].gpus,
				CPUMilli: a.CPUMilli, MemMiB: a.MemMiB, PropCPUMilli: a.PropCPUMilli, PropMemMiB: a.PropMemMiB,
				Speed: a.Speed, PropSpeed: a.PropSpeed, Profile: sources[k], Reason: a.Reason})
		}
	}
	slices.SortFunc(out, func(a, b Allocation) int {
		return cmp.Or(cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.Node, b.Node))
	})
	return out
}

// allocate fills Decisions.Allocations: for every node a job starts on in
// this pass, the allocation of all jobs running there after the pass
// (the ones started and the ones kept). Count mode places no GPUs on
// nodes, so it allocates nothing; nor does a pass under
// Config.OmitAllocations.
func (p *pass) allocate() {
	if p.count || len(p.d.Starts) == 0 || p.sc.cfg.OmitAllocations {
		return
	}
	started := make(map[int64][]gpu.Ref, len(p.d.Starts))
	touched := map[string]bool{}
	for _, st := range p.d.Starts {
		started[st.JobID] = st.GPUs
		for _, g := range st.GPUs {
			touched[g.Node] = true
		}
	}
	var nodes []Node
	for _, n := range p.s.Nodes {
		if touched[n.Name] {
			nodes = append(nodes, n)
		}
	}
	var jobs []Job
	for i := range p.s.Jobs {
		j := &p.s.Jobs[i]
		var where []gpu.Ref
		switch p.outcome[i] {
		case outRunning:
			where = j.Placement
		case outStarted:
			where = started[j.ID]
		default:
			continue
		}
		if !slices.ContainsFunc(where, func(g gpu.Ref) bool { return touched[g.Node] }) {
			continue
		}
		c := *j
		c.State, c.Placement = Running, where
		jobs = append(jobs, c)
	}
	p.d.Allocations = AllocateNodes(p.sc.cfg.CPUAlloc, nodes, jobs)
}
