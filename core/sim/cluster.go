package sim

import (
	"fmt"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// buildCluster turns a cluster description into the scheduler's nodes and
// a pool that tracks which GPUs are held.
func buildCluster(nodes []trace.Node) ([]sched.Node, gpuPool) {
	out := make([]sched.Node, 0, len(nodes))
	pool := gpuPool{nodes: make(map[string]gpuRange, len(nodes))}
	for _, n := range nodes {
		sn := sched.Node{Name: n.Name, CPUs: int(n.CPUMilli / 1000), MemMiB: n.MemMiB}
		if _, dup := pool.nodes[n.Name]; dup && pool.index == nil {
			pool.index = pool.refIndex(out)
		}
		pool.nodes[n.Name] = gpuRange{first: len(pool.held), n: n.GPUs}
		for g := range n.GPUs {
			sn.GPUs = append(sn.GPUs, sched.GPU{Index: g, MemMiB: n.GPUMemMiB})
			if pool.index != nil {
				pool.index[gpu.Ref{Node: n.Name, Index: g}] = len(pool.held)
			}
			pool.held = append(pool.held, 0)
			pool.shared = append(pool.shared, false)
		}
		out = append(out, sn)
	}
	pool.total = len(pool.held)
	pool.free = pool.total
	return out, pool
}

// gpuPool counts free GPUs and, when the scheduler names them, checks that
// no GPU is given to two jobs, unless both share (Salus). A start without
// named GPUs (the scheduler's counting mode) is checked by count only.
type gpuPool struct {
	total, free int
	nodes       map[string]gpuRange // each node's GPUs
	index       map[gpu.Ref]int     // instead of nodes, when two nodes share a name
	held        []int32             // jobs on each GPU
	shared      []bool              // its jobs share it
	// The node a GPU was last found on: a job's GPUs are mostly on one.
	lastName string
	last     gpuRange
	lastOK   bool
}

// gpuRange is a node's GPUs: held[first:first+n].
type gpuRange struct{ first, n int }

// refIndex indexes the GPUs of nodes by reference, as a later node of
// the same name overrides them.
func (p *gpuPool) refIndex(nodes []sched.Node) map[gpu.Ref]int {
	index := map[gpu.Ref]int{}
	i := 0
	for _, n := range nodes {
		for g := range n.GPUs {
			index[gpu.Ref{Node: n.Name, Index: g}] = i
			i++
		}
	}
	return index
}

// slot returns the index of GPU g in held.
func (p *gpuPool) slot(g gpu.Ref) (int, bool) {
	if p.index != nil {
		i, ok := p.index[g]
		return i, ok
	}
	if !p.lastOK || g.Node != p.lastName {
		r, ok := p.nodes[g.Node]
		if !ok {
			return 0, false
		}
		p.lastName, p.last, p.lastOK = g.Node, r, true
	}
	if g.Index < 0 || g.Index >= p.last.n {
		return 0, false
	}
	return p.last.first + g.Index, true
}

// take reserves n GPUs: the named ones, or any n when none are named. A
// sharing job may take a GPU that only sharing jobs hold.
func (p *gpuPool) take(n int, named []gpu.Ref, sharing bool) error {
	if len(named) == 0 {
		if n > p.free {
			return fmt.Errorf("needs %d GPUs; %d are free", n, p.free)
		}
		p.free -= n
		return nil
	}
	if len(named) != n {
		return fmt.Errorf("given %d GPUs for a job of %d", len(named), n)
	}
	fresh := 0
	for k, g := range named {
		i, ok := p.slot(g)
		if !ok {
			p.undo(named[:k])
			return fmt.Errorf("GPU %s/%d does not exist", g.Node, g.Index)
		}
		if p.held[i] > 0 && !(sharing && p.shared[i]) {
			p.undo(named[:k])
			return fmt.Errorf("GPU %s/%d is already held", g.Node, g.Index)
		}
		if p.held[i] == 0 {
			fresh++
			p.shared[i] = sharing
		}
		p.held[i]++
	}
	p.free -= fresh
	return nil
}

// undo releases named GPUs taken by a take that then failed.
func (p *gpuPool) undo(named []gpu.Ref) {
	for _, g := range named {
		i, _ := p.slot(g) // taken: it exists
		p.held[i]--
	}
}

// release returns n GPUs, the named ones when named; a shared GPU is free
// once its last job leaves.
func (p *gpuPool) release(n int, named []gpu.Ref) {
	if len(named) == 0 {
		p.free += n
		return
	}
	for _, g := range named {
		i, _ := p.slot(g) // held: it exists
		if p.held[i]--; p.held[i] == 0 {
			p.free++
		}
	}
}
