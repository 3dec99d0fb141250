package sched

import (
	"math/bits"
	"unsafe"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// cluster is the GPU state of one pass. Every GPU of the snapshot is a
// slot; busy marks the slots running jobs hold or starts take. The
// schedulable nodes are also indexed by their count of free GPUs
// (buckets), so that the placement queries (largest free block, best fit,
// the k emptiest nodes) cost O(GPUs per node), never O(nodes).
//
// Free counts may change tentatively while preemption looks for victims
// (pass.reclaim); busy flags change only when a decision is made.
type cluster struct {
	nodes []cnode
	refs  []gpu.Ref // the rest of the block placements are cut from (newRefs)
	src   []Node    // the snapshot's nodes
	dedup [][]GPU   // GPUs of the nodes that list an index twice (cnode.dedup)
	// byName finds a node by name. It, nodeOf and hot are built from the
	// snapshot's node names and kept from pass to pass while the names
	// stay the same (names), so that a pass over the same machines
	// rebuilds no map.
	byName   map[string]int32
	names    []string  // the node names byName was built from, in snapshot order
	nodeOf   []int32   // per snapshot node: its index in nodes, or -1 (a repeated name)
	hot      []hotNode // 1<<(64-hotShift) entries (find)
	hotShift uint
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

	// plain: every node is schedulable, has a name of its own and its
	// GPUs numbered 0..n-1 (occupy.go keeps what running jobs hold only
	// then). layout changes whenever reset numbers the slots otherwise
	// than the pass before.
	plain  bool
	layout uint64
	// same: under Config.StablePlacements, the nodes of the last reset,
	// plain, whose GPU lists (never written) it need not read again
	// (resetSame); empty when they were not plain.
	same []sameNode
	// idxLayout: index built the buckets' sizes and capSum on layout
	// idxLayout-1 (0: never).
	idxLayout uint64
}

// sameNode is a node of cluster.same: its name, GPUs and
// schedulability, the slices themselves.
type sameNode struct {
	name    string
	gpus    []GPU
	unsched bool
}

// cnode is a node of the cluster. It holds no pointer: a pass rebuilds
// its nodes without write barriers, and drops nothing of the snapshot's
// when it ends but cluster.src.
type cnode struct {
	src   int32 // its node in the snapshot (cluster.src)
	first int32 // first slot
	n     int32 // GPUs (slots)
	free  int32
	dedup int32 // its GPUs in cluster.dedup, or -1: those of its snapshot node
	sched bool
	// dense: its GPUs are indexed 0..n-1 in order, so that GPU index k
	// is slot first+k.
	dense bool
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

// reset builds the cluster of s, reusing c's memory. stable:
// Config.StablePlacements, under which nodes whose names and GPU lists
// are the very slices of the last reset are taken to be the same.
func (c *cluster) reset(nodes []Node, stable bool) {
	if stable && c.resetSame(nodes) {
		return
	}
	changed := false
	if !c.sameNames(nodes) {
		c.indexNames(nodes)
		changed = true
	}
	c.src = nodes
	clear(c.dedup)
	c.dedup = c.dedup[:0]
	c.maxCap, c.capacity, c.free, c.nsched = 0, 0, 0, 0
	c.reclTotal = 0
	c.lastName, c.lastNode = "", -1
	c.frDirty = true
	slots := int32(0)
	changed = changed || len(c.nodes) != len(c.byName)
	c.nodes = resize(c.nodes, len(c.byName)) // one per name: nodeOf numbers them in order
	c.plain = len(c.nodes) == len(nodes)
	k := 0
	for i := range nodes {
		if c.nodeOf[i] < 0 {
			continue // a second node of the same name cannot be told apart
		}
		n := &nodes[i]
		cn := &c.nodes[k]
		k++
		was := *cn
		*cn = cnode{src: int32(i), first: slots, n: int32(len(n.GPUs)), dedup: -1, sched: !n.Unschedulable, dense: denseGPUs(n.GPUs)}
		if was.src != cn.src || was.first != cn.first || was.n != cn.n || was.sched != cn.sched || was.dense != cn.dense {
			changed = true
		}
		c.plain = c.plain && cn.sched && cn.dense
		if !cn.dense {
			gpus := uniqueGPUs(n.GPUs)
			cn.n, cn.dedup = int32(len(gpus)), int32(len(c.dedup))
			c.dedup = append(c.dedup, gpus)
		}
		cn.free = cn.n
		slots += cn.n
		if cn.sched {
			c.nsched++
			c.capacity += int(cn.n)
			c.maxCap = max(c.maxCap, int(cn.n))
		}
	}
	if len(c.slotNode) != int(slots) || !c.sameSlots() {
		c.slotNode = c.slotNode[:0]
		for i := range c.nodes {
			for range c.nodes[i].n {
				c.slotNode = append(c.slotNode, int32(i))
			}
		}
	}
	c.busy = resize(c.busy, int(slots))
	clear(c.busy)
	c.recl = resize(c.recl, len(c.nodes))
	clear(c.recl)
	if changed {
		c.layout++
	}
	c.same = c.same[:0]
	if stable && c.plain {
		for i := range nodes {
			n := &nodes[i]
			c.same = append(c.same, sameNode{name: n.Name, gpus: n.GPUs, unsched: n.Unschedulable})
		}
	}
	clear(c.same[len(c.same):cap(c.same)])
}

// resetSame resets the cluster, as reset would but for the busy slots
// and free counts (occFinish sets them), if nodes are those of the last
// reset (cluster.same), the same strings and slices, plain: their slots,
// capacities and names' index stay as they are. It tells whether it did.
func (c *cluster) resetSame(nodes []Node) bool {
	if len(c.same) == 0 || len(nodes) != len(c.same) {
		return false
	}
	for i := range nodes {
		n, k := &nodes[i], &c.same[i]
		if !sameString(n.Name, k.name) || len(n.GPUs) != len(k.gpus) || unsafe.SliceData(n.GPUs) != unsafe.SliceData(k.gpus) || n.Unschedulable != k.unsched {
			return false
		}
	}
	c.src = nodes
	c.free, c.reclTotal = 0, 0
	c.lastName, c.lastNode = "", -1
	c.frDirty = true
	for k := range c.nodes {
		c.nodes[k].sched = true // plain: every node schedulable (mask leaves none hidden)
	}
	// The busy slots and free counts are the occupancy's to set
	// (occFinish): a pass on plain nodes under Config.StablePlacements
	// builds its runs from it.
	clear(c.recl)
	return true
}

// sameSlots tells whether slotNode, of the right length, still maps
// every slot to its node: the nodes have the GPU counts of the last pass.
func (c *cluster) sameSlots() bool {
	for i := range c.nodes {
		n := &c.nodes[i]
		if n.n > 0 && (c.slotNode[n.first] != int32(i) || c.slotNode[n.first+n.n-1] != int32(i)) {
			return false // slotNode never decreases: first and last tell
		}
	}
	return true
}

// sameNames tells whether nodes have the names byName was built from, in
// the same order.
func (c *cluster) sameNames(nodes []Node) bool {
	if c.byName == nil || len(nodes) != len(c.names) {
		return false
	}
	for i := range nodes {
		if nodes[i].Name != c.names[i] {
			return false
		}
	}
	return true
}

// indexNames builds byName, names and nodeOf from nodes: the first node
// of each name is kept, in snapshot order.
func (c *cluster) indexNames(nodes []Node) {
	if c.byName == nil {
		c.byName = make(map[string]int32, len(nodes))
	} else {
		clear(c.byName)
	}
	c.names = c.names[:0]
	c.nodeOf = resize(c.nodeOf, len(nodes))
	for i := range nodes {
		name := nodes[i].Name
		c.names = append(c.names, name)
		if _, dup := c.byName[name]; dup {
			c.nodeOf[i] = -1
			continue
		}
		c.nodeOf[i] = int32(len(c.byName))
		c.byName[name] = c.nodeOf[i]
	}
	b := max(4, bits.Len(uint(2*len(nodes))))
	c.hot, c.hotShift = resize(c.hot, 1<<b), uint(64-b)
	for k := range c.hot {
		c.hot[k] = hotNode{node: -1}
	}
	mask := len(c.hot) - 1
	for i, name := range c.names {
		if c.nodeOf[i] < 0 {
			continue
		}
		k := int(hotKey(name) >> c.hotShift)
		for p := range hotProbes {
			if h := &c.hot[(k+p)&mask]; h.node < 0 {
				*h = hotNode{name: name, node: c.nodeOf[i]}
				break
			}
		} // else only byName finds it
	}
}

// resetCount prepares a cluster for count mode: only the number of GPUs
// on schedulable nodes matters.
func (c *cluster) resetCount(nodes []Node) {
	c.nodes = c.nodes[:0]
	c.layout++
	c.maxCap, c.capacity, c.nsched, c.reclTotal = 0, 0, 0, 0
	for i := range nodes {
		if !nodes[i].Unschedulable {
			c.nsched++
			c.capacity += len(nodes[i].GPUs)
		}
	}
	c.free = c.capacity
}

// denseGPUs tells whether gpus are indexed 0..n-1 in order.
func denseGPUs(gpus []GPU) bool {
	for k := range gpus {
		if gpus[k].Index != k {
			return false
		}
	}
	return true
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
func (c *cluster) slot(ref gpu.Ref) int {
	s, _ := c.locate(ref)
	return s
}

// locate finds the slot of ref and its node, or -1 and -1.
func (c *cluster) locate(ref gpu.Ref) (int, int32) {
	ni := c.lastNode
	if ni < 0 || !sameString(ref.Node, c.lastName) {
		var ok bool
		if ni, ok = c.find(ref.Node); !ok {
			return -1, -1
		}
		c.lastName, c.lastNode = ref.Node, ni
	}
	n := &c.nodes[ni]
	if n.dense {
		if ref.Index >= 0 && ref.Index < int(n.n) {
			return int(n.first) + ref.Index, ni
		}
		return -1, -1
	}
	if s := c.sparseSlot(ni, ref.Index); s >= 0 {
		return s, ni
	}
	return -1, -1
}

// sparseSlot finds the slot of GPU index on node ni, whose GPUs are not
// numbered 0..n-1, or -1.
func (c *cluster) sparseSlot(ni int32, index int) int {
	for k, g := range c.gpus(ni) {
		if g.Index == index {
			return int(c.nodes[ni].first) + k
		}
	}
	return -1
}

// find returns the node named name. A caller that builds placements from
// the snapshot's own node names (the simulator does: the GPUs of the
// starts it is given carry them) passes the very strings of the nodes,
// pass after pass: hot finds those by where their bytes are, without
// reading them. Other names are compared with the node found last (a
// job's GPUs are mostly on one node), then looked up in byName.
func (c *cluster) find(name string) (int32, bool) {
	if len(c.hot) > 0 {
		mask := len(c.hot) - 1
		k := int(hotKey(name) >> c.hotShift)
		for p := range hotProbes {
			h := &c.hot[(k+p)&mask]
			if h.node < 0 {
				break
			}
			if sameString(h.name, name) {
				return h.node, true
			}
		}
	}
	if c.lastNode >= 0 && name == c.lastName {
		return c.lastNode, true
	}
	ni, ok := c.byName[name]
	return ni, ok
}

// hotNode is an entry of cluster.hot: a node and its name.
type hotNode struct {
	name string
	node int32 // -1: empty
}

// sameString tells whether a and b are the same bytes in memory: then
// they are equal, without comparing them.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// hotProbes is how many entries of hot a name may take.
const hotProbes = 4

// hotKey hashes the address of name's bytes (Fibonacci hashing: the top
// bits of the product are well mixed, whatever the allocator's strides).
func hotKey(name string) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.StringData(name)))) * 0x9e3779b97f4a7c15
}

// gpus returns the GPUs of node i, each index once.
func (c *cluster) gpus(i int32) []GPU {
	if d := c.nodes[i].dedup; d >= 0 {
		return c.dedup[d]
	}
	return c.src[c.nodes[i].src].GPUs
}

// name returns the name of node i.
func (c *cluster) name(i int32) string { return c.src[c.nodes[i].src].Name }

// index builds the buckets once the running jobs' slots are marked busy
// and taken from their nodes' free counts.
func (c *cluster) index() {
	if c.idxLayout == c.layout+1 {
		// The nodes' sizes are those of the last index: only the free
		// counts moved.
		for k := range c.buckets {
			// An empty bucket has no bit set, and a hint above its
			// lowest member is lowered by add.
			if b := &c.buckets[k]; b.count != 0 {
				clear(b.bits)
				b.count = 0
			}
		}
		for i := range c.nodes {
			if n := &c.nodes[i]; n.sched {
				c.free += int(n.free)
				c.buckets[n.free].add(i)
			}
		}
		c.frDirty = true
		return
	}
	c.idxLayout = c.layout + 1
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
		free := int(n.free) // reset counted every GPU free, pass.hold the busy ones
		if n.sched {
			c.free += free
			c.buckets[free].add(i)
			caps[n.n]++
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
func (c *cluster) ref(s int32) gpu.Ref {
	i := c.slotNode[s]
	n := &c.nodes[i]
	if n.dense {
		return gpu.Ref{Node: c.name(i), Index: int(s - n.first)}
	}
	return gpu.Ref{Node: c.name(i), Index: c.gpus(i)[s-n.first].Index}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
