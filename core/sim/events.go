package sim

import "container/heap"

// completion is a running job's scheduled finish. run is the job's run
// number when it was scheduled: a preemption starts a new run, which
// turns the old completion stale. With lane set, it is instead a retime
// of that shared GPU's turns (share.go), stale once the GPU retimed since
// (epoch); job is then one of its jobs, for the order of ties.
type completion struct {
	at    float64
	job   *job
	run   int
	lane  *shareGPU
	epoch int
}

// completions is a min-heap of finishes, earliest first; ties go to the
// job that arrived first so that runs are reproducible.
type completions []completion

func (h completions) Len() int { return len(h) }
func (h completions) Less(a, b int) bool {
	if h[a].at != h[b].at {
		return h[a].at < h[b].at
	}
	return h[a].job.order < h[b].job.order
}
func (h completions) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *completions) Push(x any)   { *h = append(*h, x.(completion)) }
func (h *completions) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// next returns the earliest completion still valid, dropping stale ones.
func (h *completions) next() (completion, bool) {
	for h.Len() > 0 {
		c := (*h)[0]
		if c.lane != nil {
			if c.lane.epoch == c.epoch {
				return c, true
			}
		} else if c.run == c.job.run && c.job.running && !c.job.stopping {
			return c, true
		}
		heap.Pop(h)
	}
	return completion{}, false
}

func (h *completions) push(c completion) { heap.Push(h, c) }
func (h *completions) pop()              { heap.Pop(h) }
