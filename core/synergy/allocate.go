package synergy

import (
	"fmt"
	"math"
)

// NodeResources is what one node offers the jobs placed on it.
type NodeResources struct {
	Name string
	// GPUs is the node's GPU count: the proportional share of a job is
	// its GPUs over this, of the CPUs and of the memory.
	GPUs     int
	CPUMilli int64
	MemMiB   int64
}

// JobDemand is one job (or a multi-node job's part) placed on a node; the
// cluster scheduler has already decided its GPUs.
type JobDemand struct {
	ID   int64
	GPUs int
	// Profile is the job's sensitivity; the zero Profile is flat.
	Profile Profile
	// MinCPUMilli and MinMemMiB are floors below which the job is never
	// taken, whatever its profile says (for example what it asked for as
	// a minimum). They are capped at the proportional share.
	MinCPUMilli int64
	MinMemMiB   int64
}

// Allocation is what one job gets on its node, and why.
type Allocation struct {
	ID       int64
	CPUMilli int64
	MemMiB   int64
	// PropCPUMilli and PropMemMiB are the proportional share.
	PropCPUMilli int64
	PropMemMiB   int64
	// Speed is the profile's speed under this allocation; PropSpeed under
	// the proportional share. Speed >= PropSpeed always.
	Speed     float64
	PropSpeed float64
	// Reason says in a sentence why the job got what it got.
	Reason string
}

// Options tune Allocate. The zero value uses the defaults.
type Options struct {
	// CPUQuantumMilli is the step in which spare CPU is handed out;
	// default 500 (half a core).
	CPUQuantumMilli int64
	// MemQuantumMiB is the step in which spare memory is handed out;
	// default 4096.
	MemQuantumMiB int64
	// FloorCPUMilli and FloorMemMiB are the least any job keeps (capped
	// at its proportional share); defaults 500 and 1024.
	FloorCPUMilli int64
	FloorMemMiB   int64
}

func (o Options) withDefaults() Options {
	if o.CPUQuantumMilli <= 0 {
		o.CPUQuantumMilli = 500
	}
	if o.MemQuantumMiB <= 0 {
		o.MemQuantumMiB = 4096
	}
	if o.FloorCPUMilli <= 0 {
		o.FloorCPUMilli = 500
	}
	if o.FloorMemMiB <= 0 {
		o.FloorMemMiB = 1024
	}
	return o
}

// lookahead is how many quanta Allocate considers at once for one job, so
// that a flat stretch of a curve followed by a rise (a dataset that
// starts to fit in the page cache) is not mistaken for saturation.
const lookahead = 8

// Proportional gives every job its GPUs' share of the node's CPUs and
// memory, the common practice Synergy improves on. When the jobs hold more
// GPUs than the node declares, shares are taken of their total instead,
// so the node is never oversubscribed.
func Proportional(node NodeResources, jobs []JobDemand) []Allocation {
	out := make([]Allocation, len(jobs))
	for i, j := range jobs {
		c, m := propShare(node, jobs, j)
		s := j.Profile.Speed(j.GPUs, c, m)
		out[i] = Allocation{ID: j.ID, CPUMilli: c, MemMiB: m, PropCPUMilli: c, PropMemMiB: m,
			Speed: s, PropSpeed: s, Reason: fmt.Sprintf("proportional: %d of %d GPUs", j.GPUs, denominator(node, jobs))}
	}
	return out
}

func denominator(node NodeResources, jobs []JobDemand) int {
	total := 0
	for _, j := range jobs {
		total += max(j.GPUs, 0)
	}
	return max(node.GPUs, total, 1)
}

// propShare is a job's proportional share, rounded down so the shares
// never add up to more than the node holds.
func propShare(node NodeResources, jobs []JobDemand, j JobDemand) (cpuMilli, memMiB int64) {
	d := int64(denominator(node, jobs))
	g := int64(max(j.GPUs, 0))
	return node.CPUMilli * g / d, node.MemMiB * g / d
}

// SynergyNode is the Synergy paper's testbed server: 8 V100 GPUs, 24
// CPUs and 500 GB of memory, 3 cores and 62.5 GiB per GPU proportionally.
var SynergyNode = NodeResources{GPUs: 8, CPUMilli: 24000, MemMiB: 500 * 1024}

// ProportionalShare is job j's proportional share of node: the node's
// CPUs and memory times j's GPUs over the node's, rounded down.
func ProportionalShare(node NodeResources, j JobDemand) (cpuMilli, memMiB int64) {
	return propShare(node, nil, j)
}

// Allocate is Synergy's allocation on one node with default Options.
func Allocate(node NodeResources, jobs []JobDemand) []Allocation {
	return AllocateWith(node, jobs, Options{})
}

// AllocateWith is Synergy's allocation on one node, in three steps:
//
//  1. Each job's proportional share is worked out, and then the least CPU
//     and the least memory that keep its speed at least what the
//     proportional share gives (its profile says how much an insensitive
//     job can give up), never below the floors.
//  2. What the node holds beyond those minimums is the pool. CPU quanta go
//     one step at a time to the job whose cluster throughput (GPUs x
//     speed) gains most per quantum, looking a few quanta ahead; then
//     memory quanta the same way, with the CPUs now decided.
//  3. The pool is handed out until it is empty or no job gains anything;
//     the rest stays free.
//
// The result is in the order of jobs and deterministic: among equal
// gains the job holding least per GPU goes first, then the earlier job. Every job's Speed is at least its PropSpeed, and the sums
// of CPUMilli and MemMiB never exceed the node's.
func AllocateWith(node NodeResources, jobs []JobDemand, opt Options) []Allocation {
	opt = opt.withDefaults()
	out := Proportional(node, jobs)
	if len(jobs) == 0 {
		return out
	}
	// Step 1: shrink each job to what keeps its proportional speed.
	var usedCPU, usedMem int64
	for i, j := range jobs {
		a := &out[i]
		g := float64(max(j.GPUs, 1))
		propCPUSpeed := j.Profile.CPU.At(float64(a.PropCPUMilli) / 1000 / g)
		propMemSpeed := j.Profile.Mem.At(float64(a.PropMemMiB) / 1024 / g)
		needCPU := int64(math.Ceil(j.Profile.CPU.Least(propCPUSpeed) * g * 1000))
		needMem := int64(math.Ceil(j.Profile.Mem.Least(propMemSpeed) * g * 1024))
		a.CPUMilli = min(a.PropCPUMilli, max(needCPU, opt.FloorCPUMilli, j.MinCPUMilli))
		a.MemMiB = min(a.PropMemMiB, max(needMem, opt.FloorMemMiB, j.MinMemMiB))
		usedCPU += a.CPUMilli
		usedMem += a.MemMiB
	}
	// Step 2 and 3: hand out the pool, CPU first, then memory.
	grow(jobs, out, node.CPUMilli-usedCPU, opt.CPUQuantumMilli,
		func(a *Allocation, d int64) { a.CPUMilli += d }, func(a Allocation) int64 { return a.CPUMilli })
	grow(jobs, out, node.MemMiB-usedMem, opt.MemQuantumMiB,
		func(a *Allocation, d int64) { a.MemMiB += d }, func(a Allocation) int64 { return a.MemMiB })
	for i, j := range jobs {
		a := &out[i]
		a.Speed = j.Profile.Speed(j.GPUs, a.CPUMilli, a.MemMiB)
		a.Reason = reason(*a)
	}
	return out
}

// grow hands pool out in quanta by the greatest gain in GPUs x speed per
// quantum; add applies a step to an allocation and amount reads what it
// holds. Among equal gains the job holding least per GPU goes first, so
// that identical jobs end up with the same share.
func grow(jobs []JobDemand, out []Allocation, pool, quantum int64, add func(*Allocation, int64), amount func(Allocation) int64) {
	const minGain, tie = 1e-9, 1e-12
	for pool > 0 {
		best, bestK, bestRate, bestPer := -1, int64(0), minGain, 0.0
		for i, j := range jobs {
			a := out[i]
			per := float64(amount(a)) / float64(max(j.GPUs, 1))
			base := float64(j.GPUs) * j.Profile.Speed(j.GPUs, a.CPUMilli, a.MemMiB)
			for k := int64(1); k <= lookahead; k++ {
				step := min(k*quantum, pool)
				trial := a
				add(&trial, step)
				gain := float64(j.GPUs)*j.Profile.Speed(j.GPUs, trial.CPUMilli, trial.MemMiB) - base
				rate := gain * float64(quantum) / float64(step)
				if rate > bestRate+tie || (best >= 0 && rate > bestRate-tie && per < bestPer-1e-9) {
					best, bestK, bestRate, bestPer = i, step, rate, per
				}
				if step == pool {
					break
				}
			}
		}
		if best < 0 {
			return
		}
		add(&out[best], bestK)
		pool -= bestK
	}
}

// reason explains an allocation against the proportional share.
func reason(a Allocation) string {
	cores := func(m int64) string { return fmt.Sprintf("%.1f", float64(m)/1000) }
	gib := func(m int64) string { return fmt.Sprintf("%.0f", float64(m)/1024) }
	res := fmt.Sprintf("%s cores (proportional %s), %s GiB (proportional %s)",
		cores(a.CPUMilli), cores(a.PropCPUMilli), gib(a.MemMiB), gib(a.PropMemMiB))
	switch {
	case a.Speed > a.PropSpeed*1.001:
		return fmt.Sprintf("sensitive: %s; speed %.2f instead of %.2f", res, a.Speed, a.PropSpeed)
	case a.CPUMilli < a.PropCPUMilli || a.MemMiB < a.PropMemMiB:
		return fmt.Sprintf("insensitive: %s; gave the rest to others at no cost (speed %.2f)", res, a.Speed)
	}
	return fmt.Sprintf("unchanged: %s; speed %.2f", res, a.Speed)
}
