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
	pool := gpuPool{index: map[gpu.Ref]int{}}
	for _, n := range nodes {
		sn := sched.Node{Name: n.Name, CPUs: int(n.CPUMilli / 1000), MemMiB: n.MemMiB}
		for g := range n.GPUs {
			sn.GPUs = append(sn.GPUs, sched.GPU{Index: g, MemMiB: n.GPUMemMiB})
			pool.index[gpu.Ref{Node: n.Name, Index: g}] = len(pool.held)
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
	index       map[gpu.Ref]int
	held        []int32 // jobs on each GPU
	shared      []bool  // its jobs share it
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
		i, ok := p.index[g]
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
		p.held[p.index[g]]--
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
		i := p.index[g]
		if p.held[i]--; p.held[i] == 0 {
			p.free++
		}
	}
}
