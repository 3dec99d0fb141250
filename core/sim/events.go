package sim

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

func (h completions) less(a, b int) bool {
	if h[a].at != h[b].at {
		return h[a].at < h[b].at
	}
	return h[a].job.order < h[b].job.order
}

// up and down are container/heap's, on the typed slice: no completion
// is boxed into an interface (an allocation per push and pop).
func (h completions) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h completions) down(i0, n int) {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.less(j2, j1) {
			j = j2 // right child
		}
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// next returns the earliest completion still valid, dropping stale ones.
func (h *completions) next() (completion, bool) {
	for len(*h) > 0 {
		c := (*h)[0]
		if c.lane != nil {
			if c.lane.epoch == c.epoch {
				return c, true
			}
		} else if c.run == c.job.run && c.job.running && !c.job.stopping {
			return c, true
		}
		h.pop()
	}
	return completion{}, false
}

// push adds c, as heap.Push.
func (h *completions) push(c completion) {
	*h = append(*h, c)
	h.up(len(*h) - 1)
}

// pop drops the earliest completion, as heap.Pop.
func (h *completions) pop() {
	n := len(*h) - 1
	(*h)[0], (*h)[n] = (*h)[n], (*h)[0]
	h.down(0, n)
	*h = (*h)[:n]
}
