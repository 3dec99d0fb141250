package hub

import (
	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/engine"
)

// A reconnecting agent reports the GPUs of the runs it still has, which
// the engine adopts with them (core/engine/adopt.go).

var _ engine.RunGPUsReporter = (*remoteNode)(nil)

// runGPUsOf returns the GPUs of each run a machine reported, nil when its
// agent reported none (an older agent's hello).
func runGPUsOf(n wire.Node) map[int64][]int {
	if n.RunningGPUs == nil {
		return nil
	}
	out := make(map[int64][]int, len(n.RunningGPUs))
	for _, j := range n.RunningGPUs {
		out[j.JobID] = append([]int{}, j.GPUs...)
	}
	return out
}

// RunGPUs implements engine.RunGPUsReporter: the GPUs job held when the
// agent said hello.
func (n *remoteNode) RunGPUs(job int64) ([]int, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	g, ok := n.runGPUs[job]
	return append([]int(nil), g...), ok
}
