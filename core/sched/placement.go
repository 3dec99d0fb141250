package sched

import (
	"math"
	"slices"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// rule is what placement demands of one job in one pass.
type rule struct {
	n int // GPUs, all or none (gang)
	// maxNodes bounds the nodes the job may span; 0 means any number.
	maxNodes int
	// spread fills the smallest free blocks first when the job cannot fit
	// on one node (jobs that do not mind spanning nodes soak up
	// fragments); otherwise the emptiest nodes are used, so the job spans
	// as few nodes as possible.
	spread bool
	// consolidated jobs start at the fewest nodes that could hold them
	// (minNodes) and relax by one node after every LocalityWaitS waited.
	consolidated bool
	minNodes     int
	waited       float64
}

// ruleFor decides the placement rule of a pending job.
func (p *pass) ruleFor(e *entry) rule {
	r := rule{n: int(e.gpus)}
	if p.count {
		r.spread = true
		return r
	}
	j := &p.s.Jobs[e.job]
	skew, known := skewOf(j, &p.models)
	if known && skew < p.sc.cfg.SkewThreshold {
		r.spread = true
		return r
	}
	r.consolidated = true
	r.minNodes = p.cl.minNodes(r.n)
	if r.minNodes == 0 {
		return r // too large for the cluster: never placed
	}
	r.waited = waitedS(j, p.now)
	r.maxNodes = r.minNodes + p.relaxSteps(r.waited)
	if r.maxNodes >= p.cl.nsched {
		r.maxNodes = 0
	}
	return r
}

// waitedS is how long a pending job has waited in all: its age less its
// run time.
func waitedS(j *Job, now float64) float64 {
	w := now - j.SubmitTime - j.ExecutedS
	if !(w > 0) {
		return 0
	}
	return w
}

// relaxSteps is how many nodes Philly's locality relaxation has added
// after waiting w seconds.
func (p *pass) relaxSteps(w float64) int {
	step := p.sc.cfg.LocalityWaitS
	if step <= 0 {
		return 0
	}
	k := math.Floor(w / step)
	if k > float64(p.cl.nsched) {
		return p.cl.nsched
	}
	return int(k)
}

// nextRelax is when a consolidated job's locality next relaxes, or 0.
func (p *pass) nextRelax(r rule) float64 {
	step := p.sc.cfg.LocalityWaitS
	if !r.consolidated || r.maxNodes == 0 || step <= 0 {
		return 0
	}
	k := math.Floor(r.waited/step) + 1
	return p.now + k*step - r.waited
}

// fits tells whether r can be placed on the free GPUs.
func (c *cluster) fits(r rule) bool {
	if r.n <= 0 || r.n > c.free {
		return false
	}
	if r.maxNodes == 0 {
		return true
	}
	if big, _ := c.largest(); big >= r.n {
		return true
	}
	return r.maxNodes > 1 && c.topSum(r.maxNodes) >= r.n
}

// refusal is placement's own word on a job it cannot place now, even
// with reclaimable more GPUs freed by preemption: the request is invalid
// (no GPUs), larger than the schedulable nodes, more than is free, or
// placeable only on more nodes than its locality allows. The walk hands
// it to explain, which words it and refines a capacity refusal under
// fair share; explain never decides a cause of its own. Locality is the
// cause only where it binds: a job that may span as many nodes as it has
// GPUs fits on any r.n free GPUs, so when it waits it waits for GPUs
// (those it could reclaim were kept from it), not for nodes, and another
// node allowed would change nothing.
func (c *cluster) refusal(r rule, reclaimable int) WaitCause {
	switch {
	case r.n <= 0:
		return WaitInvalid
	case r.n > c.capacity:
		return WaitTooLarge
	case r.n > c.free+reclaimable || r.maxNodes == 0 || r.maxNodes >= r.n:
		return WaitCapacity
	}
	return WaitLocality
}

// fitsReclaiming tells whether r could be placed if every reclaimable GPU
// were freed: the test before looking for victims.
func (c *cluster) fitsReclaiming(r rule) bool {
	if r.n <= 0 || r.n > c.free+c.reclTotal {
		return false
	}
	if r.maxNodes == 0 {
		return true
	}
	h := c.fr()
	sum, k := 0, r.maxNodes
	for f := len(h) - 1; f > 0 && k > 0; f-- {
		if f >= r.n && h[f] > 0 {
			return true
		}
		m := min(int(h[f]), k)
		sum += m * f
		k -= m
	}
	return sum >= r.n
}

// place takes r's GPUs; r must fit. A job that fits on one node gets the
// node with the fewest free GPUs that hold it (best fit), so that whole
// nodes stay free for large jobs. A larger job takes whole nodes (the
// emptiest first, or the smallest blocks first when it may spread) until
// the rest fits on one node, which again is the best fit.
func (c *cluster) place(r rule) []gpu.Ref {
	c.taken = c.taken[:0]
	rem := r.n
	for rem > 0 {
		if big, _ := c.largest(); big >= rem {
			c.taken = c.take(c.bestFit(rem), rem, c.taken)
			break
		}
		var i int
		if r.spread {
			i = c.smallest()
		} else {
			_, i = c.largest()
		}
		k := int(c.nodes[i].free)
		c.taken = c.take(i, k, c.taken)
		rem -= k
	}
	slices.Sort(c.taken) // in node order, then GPU order
	out := c.newRefs(len(c.taken))
	for i, s := range c.taken {
		out[i] = c.ref(s)
	}
	return out
}

// refBlock is how many GPU references newRefs allocates at once.
const refBlock = 256

// newRefs returns n GPU references for a placement, cut from a block
// kept between passes: one allocation for many starts (a replay starts
// thousands of jobs, most on one GPU) instead of one each. The slice's
// capacity is n, so that an append to it cannot reach the next
// placement's.
func (c *cluster) newRefs(n int) []gpu.Ref {
	if n > len(c.refs) {
		c.refs = make([]gpu.Ref, max(n, refBlock))
	}
	out := c.refs[:n:n]
	c.refs = c.refs[n:]
	return out
}
