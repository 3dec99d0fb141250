package sched

import (
	"math/rand/v2"
	"strconv"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// genOpts shapes a random snapshot.
type genOpts struct {
	nodes, gpusPerNode int
	jobs               int
	// busy is the share of GPUs running jobs hold (roughly).
	busy float64
	// unschedulable is the share of nodes marked unschedulable.
	unschedulable float64
	// mixedNodes gives nodes 1 to gpusPerNode GPUs instead of exactly
	// gpusPerNode.
	mixedNodes bool
	thresholds []float64
}

var (
	genSizes  = []int{1, 1, 1, 1, 2, 2, 4, 4, 8, 16}
	genModels = []string{"resnet50", "vgg16", "inception3", "gpt2", "", "bert", "alexnet"}
)

// randomSnapshot builds a consistent snapshot: running jobs hold distinct
// GPUs of their size, queue states agree with the services.
func randomSnapshot(rng *rand.Rand, o genOpts) Snapshot {
	if o.thresholds == nil {
		o.thresholds = DefaultThresholds
	}
	s := Snapshot{Now: 1e6}
	free := make([][]gpu.Ref, o.nodes)
	for i := 0; i < o.nodes; i++ {
		g := o.gpusPerNode
		if o.mixedNodes {
			g = 1 + rng.IntN(o.gpusPerNode)
		}
		n := Node{Name: "node-" + strconv.Itoa(i), GPUs: make([]GPU, g), Unschedulable: rng.Float64() < o.unschedulable}
		for k := range n.GPUs {
			n.GPUs[k] = GPU{Index: k, MemMiB: 81920}
			free[i] = append(free[i], gpu.Ref{Node: n.Name, Index: k})
		}
		s.Nodes = append(s.Nodes, n)
	}
	total := o.nodes * o.gpusPerNode
	budget := int(o.busy * float64(total))
	node := 0
	for id := 1; id <= o.jobs; id++ {
		j := Job{
			ID:         int64(id),
			GPUs:       genSizes[rng.IntN(len(genSizes))],
			SubmitTime: rng.Float64() * s.Now,
			Model:      genModels[rng.IntN(len(genModels))],
		}
		if rng.IntN(3) > 0 {
			j.DurationS = 60 + rng.Float64()*20000
		}
		if rng.IntN(2) == 0 {
			j.ExecutedS = rng.Float64() * min(s.Now-j.SubmitTime, 20000)
			j.AttainedService = j.ExecutedS * float64(j.GPUs)
			j.LastStartTime = j.SubmitTime + j.ExecutedS
		}
		if budget >= j.GPUs {
			if g := takeFree(free, &node, j.GPUs); g != nil {
				j.State, j.Placement = Running, g
				budget -= j.GPUs
			}
		}
		j.Queue.Index = levelOf(j.AttainedService, o.thresholds)
		if j.Queue.Index > 0 {
			j.Queue.Since = j.SubmitTime + j.ExecutedS/2
		}
		s.Jobs = append(s.Jobs, j)
	}
	rng.Shuffle(len(s.Jobs), func(a, b int) { s.Jobs[a], s.Jobs[b] = s.Jobs[b], s.Jobs[a] })
	return s
}

// takeFree takes n free GPUs, the current node first, then the next ones.
func takeFree(free [][]gpu.Ref, node *int, n int) []gpu.Ref {
	avail := 0
	for _, f := range free {
		avail += len(f)
	}
	if avail < n {
		return nil
	}
	var out []gpu.Ref
	for len(out) < n {
		f := free[*node]
		k := min(n-len(out), len(f))
		out = append(out, f[:k]...)
		free[*node] = f[k:]
		if len(free[*node]) == 0 {
			*node = (*node + 1) % len(free)
		}
	}
	return out
}

func levelOf(s float64, thr []float64) int {
	q := 0
	for q < len(thr) && s >= thr[q] {
		q++
	}
	return q
}
