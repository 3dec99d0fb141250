package engine

import (
	"sort"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// Machines the server no longer hears. When a machine disconnects, the
// engine keeps what it last knew of it (its status, its GPUs' last
// readings), so that pages show that, with its age, rather than nothing
// or stale figures as live. A machine that comes back, or that has been
// gone for goneKept, is forgotten.

// goneKept is how long a disconnected machine's last known state is kept.
const goneKept = time.Hour

// GoneNode is what the engine last knew of a disconnected machine.
type GoneNode struct {
	Status NodeStatus
	// Samples are its GPUs' last readings; LostAt when it disconnected.
	Samples []gpu.Sample
	LostAt  time.Time
}

// rememberGone keeps n's last known state as it disconnects at now;
// e.mu is held.
func (e *Engine) rememberGone(n Node, now time.Time) {
	cpus, mem := n.Resources()
	var jobs []int64
	for _, ref := range n.Running() {
		jobs = append(jobs, ref.Job)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a] < jobs[b] })
	name := n.Name()
	e.gone[name] = GoneNode{LostAt: now, Samples: n.Sample(now), Status: NodeStatus{Name: name, Devices: n.Devices(),
		CPUs: cpus, MemMiB: mem, Draining: e.draining[name], Cordoned: e.cordoned[name], ConnectedAt: e.connected[name], Jobs: jobs}}
}

// GoneNodes lists the machines that disconnected within goneKept and
// have not come back, by name, as last known.
func (e *Engine) GoneNodes() []GoneNode {
	now := e.cfg.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]GoneNode, 0, len(e.gone))
	for name, g := range e.gone {
		if now.Sub(g.LostAt) > goneKept {
			delete(e.gone, name)
			continue
		}
		out = append(out, g)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Status.Name < out[b].Status.Name })
	return out
}
