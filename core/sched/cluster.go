package sched

import "math/bits"

// cluster is the GPU state of one pass. Every GPU of the snapshot is a
// slot; busy marks the slots running jobs hold or starts take. The
// schedulable nodes are also indexed by their count of free GPUs
// (buckets), so that the placement queries (largest free block, best fit,
// the k emptiest nodes) cost O(GPUs per node), never O(nodes).
//
// Free counts may change tentatively while preemption looks for victims
// (pass.reclaim); busy flags change only when a decision is made.
type cluster struct {
	nodes    []cnode
	byName   map[string]int32
	slotNode []int32
	busy     []bool
	buckets  []bucket // by free GPUs on the node
	words    int      // bitset words per bucket

	maxCap   int   // GPUs of the largest schedulable node
	capacity int   // GPUs on schedulable nodes
	free     int   // free GPUs on schedulable nodes
	nsched   int   // schedulable nodes
	capSum   []int // capSum[k]: GPUs of the k largest schedulable nodes

	// Reclaimable GPUs: held on schedulable nodes by running jobs that a
	// pending job could still preempt. recl is per node; frHist counts
	// nodes by free+recl and is rebuilt lazily.
	recl      []int32
	reclTotal int
	frHist    []int32
	frDirty   bool

	lastName string
	lastNode int32
	taken    []int32 // scratch: slots a placement takes
}

type cnode struct {
	name  string
	gpus  []GPU
	first int32 // first slot
	free  int32
	sched bool
}

// bucket is a set of node indices, as a bitset that yields its lowest
// member first.
type bucket struct {
	bits  []uint64
	count int
	hint  int // no set bit in words below hint
}

func (b *bucket) add(i int) {
	w := i >> 6
	b.bits[w] |= 1 << uint(i&63)
	b.count++
	if w < b.hint {
		b.hint = w
	}
}

func (b *bucket) remove(i int) {
	b.bits[i>>6] &^= 1 << uint(i&63)
	b.count--
}

func (b *bucket) first() int {
	if b.count == 0 {
		return -1
	}
	for w := b.hint; w < len(b.bits); w++ {
		if b.bits[w] != 0 {
			b.hint = w
			return w<<6 + bits.TrailingZeros64(b.bits[w])
		}
	}
	return -1
}

// reset builds the cluster of s, reusing c's memory.
func (c *cluster) reset(nodes []Node) {
	c.nodes = c.nodes[:0]
	if c.byName == nil {
		c.byName = make(map[string]int32, len(nodes))
	} else {
		clear(c.byName)
	}
	c.slotNode = c.slotNode[:0]
	c.busy = c.busy[:0]
	c.maxCap, c.capacity, c.free, c.nsched = 0, 0, 0, 0
	c.reclTotal = 0
	c.lastName, c.lastNode = "", -1
	c.frDirty = true
	for i := range nodes {
		n := &nodes[i]
		if _, dup := c.byName[n.Name]; dup {
			continue // a second node of the same name cannot be told apart
		}
		idx := int32(len(c.nodes))
		c.byName[n.Name] = idx
		gpus := uniqueGPUs(n.GPUs)
		c.nodes = append(c.nodes, cnode{name: n.Name, gpus: gpus, first: int32(len(c.slotNode)), sched: !n.Unschedulable})
		for range gpus {
			c.slotNode = append(c.slotNode, idx)
			c.busy = append(c.busy, false)
		}
		if !n.Unschedulable {
			c.nsched++
			c.capacity += len(gpus)
			c.maxCap = max(c.maxCap, len(gpus))
		}
	}
	c.recl = resize(c.recl, len(c.nodes))
	clear(c.recl)
}

// resetCount prepares a cluster for count mode: only the number of GPUs
// on schedulable nodes matters.
func (c *cluster) resetCount(nodes []Node) {
	c.nodes = c.nodes[:0]
	c.maxCap, c.capacity, c.nsched, c.reclTotal = 0, 0, 0, 0
	for i := range nodes {
		if !nodes[i].Unschedulable {
			c.nsched++
			c.capacity += len(nodes[i].GPUs)
		}
	}
	c.free = c.capacity
}

// uniqueGPUs returns gpus without repeated indices (the first one wins).
// The common case, indices 0..n-1 in order, costs no allocation.
func uniqueGPUs(gpus []GPU) []GPU {
	inOrder := true
	for i, g := range gpus {
		if g.Index != i {
			inOrder = false
			break
		}
	}
	if inOrder {
		return gpus
	}
	seen := make(map[int]bool, len(gpus))
	out := make([]GPU, 0, len(gpus))
	for _, g := range gpus {
		if !seen[g.Index] {
			seen[g.Index] = true
			out = append(out, g)
		}
	}
	return out
}

// slot finds the slot of ref, or -1.
func (c *cluster) slot(ref GPURef) int {
	ni := c.lastNode
	if ni < 0 || ref.Node != c.lastName {
		var ok bool
		ni, ok = c.byName[ref.Node]
		if !ok {
			return -1
		}
		c.lastName, c.lastNode = ref.Node, ni
	}
	n := &c.nodes[ni]
	if ref.Index >= 0 && ref.Index < len(n.gpus) && n.gpus[ref.Index].Index == ref.Index {
		return int(n.first) + ref.Index
	}
	for k, g := range n.gpus {
		if g.Index == ref.Index {
			return int(n.first) + k
		}
	}
	return -1
}

// index builds the buckets once the running jobs' slots are marked busy.
func (c *cluster) index() {
	c.words = (len(c.nodes) + 63) >> 6
	c.buckets = resize(c.buckets, c.maxCap+1)
	for k := range c.buckets {
		b := &c.buckets[k]
		b.bits = resize(b.bits, c.words)
		clear(b.bits)
		b.count, b.hint = 0, 0
	}
	caps := resize(c.frHist, c.maxCap+1) // borrowed to count capacities
	clear(caps)
	for i := range c.nodes {
		n := &c.nodes[i]
		free := 0
		for s := int(n.first); s < int(n.first)+len(n.gpus); s++ {
			if !c.busy[s] {
				free++
			}
		}
		n.free = int32(free)
		if n.sched {
			c.free += free
			c.buckets[free].add(i)
			caps[len(n.gpus)]++
		}
	}
	c.capSum = resize(c.capSum, c.nsched+1)
	c.capSum[0] = 0
	k := 0
	for size := c.maxCap; size >= 0; size-- {
		for range caps[size] {
			k++
			c.capSum[k] = c.capSum[k-1] + size
		}
	}
	c.frHist = caps
	c.frDirty = true
}

// setFree moves node i to the bucket of its new free count.
func (c *cluster) setFree(i int, free int32) {
	n := &c.nodes[i]
	c.buckets[n.free].remove(i)
	c.free += int(free - n.free)
	n.free = free
	c.buckets[free].add(i)
}

// largest returns the most free GPUs on one node and the first such node.
func (c *cluster) largest() (int, int) {
	for k := c.maxCap; k > 0; k-- {
		if c.buckets[k].count > 0 {
			return k, c.buckets[k].first()
		}
	}
	return 0, -1
}

// bestFit returns the first node with the fewest free GPUs that are at
// least n, or -1.
func (c *cluster) bestFit(n int) int {
	for k := max(n, 1); k <= c.maxCap; k++ {
		if c.buckets[k].count > 0 {
			return c.buckets[k].first()
		}
	}
	return -1
}

// smallest returns the first node with the fewest free GPUs (at least
// one), or -1.
func (c *cluster) smallest() int { return c.bestFit(1) }

// topSum returns the free GPUs of the k emptiest nodes together.
func (c *cluster) topSum(k int) int {
	sum := 0
	for f := c.maxCap; f > 0 && k > 0; f-- {
		m := min(c.buckets[f].count, k)
		sum += m * f
		k -= m
	}
	return sum
}

// minNodes returns the fewest schedulable nodes that have n GPUs in all,
// or 0 when all of them together have fewer.
func (c *cluster) minNodes(n int) int {
	if n > c.capacity {
		return 0
	}
	lo, hi := 1, c.nsched
	for lo < hi {
		m := (lo + hi) / 2
		if c.capSum[m] >= n {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// fr refreshes the histogram of free+reclaimable GPUs per node.
func (c *cluster) fr() []int32 {
	if c.frDirty {
		clear(c.frHist)
		for i := range c.nodes {
			n := &c.nodes[i]
			if n.sched {
				c.frHist[int(n.free)+int(c.recl[i])]++
			}
		}
		c.frDirty = false
	}
	return c.frHist
}

// take marks k free GPUs of node i busy, lowest slots first, and appends
// their slots to out.
func (c *cluster) take(i, k int, out []int32) []int32 {
	n := &c.nodes[i]
	c.setFree(i, n.free-int32(k))
	for s := int(n.first); k > 0; s++ {
		if !c.busy[s] {
			c.busy[s] = true
			out = append(out, int32(s))
			k--
		}
	}
	c.frDirty = true
	return out
}

// ref names the GPU of slot s.
func (c *cluster) ref(s int32) GPURef {
	n := &c.nodes[c.slotNode[s]]
	return GPURef{Node: n.name, Index: n.gpus[s-n.first].Index}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
