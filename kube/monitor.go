package kube

import (
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
)

// Monitors finds the monitor-only gpuportal agent (gpuportal agent
// --monitor-only, the DaemonSet of deploy/kubernetes/monitor.yaml) that
// watches a node's GPUs: it registers under the node's name.
// *engine.Engine implements it.
type Monitors interface {
	Monitor(name string) (engine.Monitor, bool)
}

// monitor returns the node's monitor, if one is connected.
func (n *node) monitor() (engine.Monitor, bool) {
	if n.e.cfg.Monitors == nil {
		return nil, false
	}
	return n.e.cfg.Monitors.Monitor(n.name)
}

// Sample implements engine.Node: the readings of the node's monitor for
// each GPU gpuportal may use (NVML's GPU i is the node's GPU i, as
// NVIDIA_VISIBLE_DEVICES numbers them); without a monitor, each GPU's
// size and nothing used, since the API server reports no GPU readings.
func (n *node) Sample(now time.Time) []gpu.Sample {
	devs := n.Devices()
	byIndex := make(map[int]gpu.Sample)
	if m, ok := n.monitor(); ok {
		for _, s := range m.Sample(now) {
			byIndex[s.Index] = s
		}
	}
	out := make([]gpu.Sample, len(devs))
	for i, d := range devs {
		s, ok := byIndex[d.Index]
		if !ok {
			s = gpu.Sample{Index: d.Index, MemMiB: d.MemMiB}
		}
		s.At = now
		out[i] = s
	}
	return out
}

// LiveMemoryUnavailable implements engine.LiveMemoryNode: the API
// server reports no GPU memory in use, so without a monitor it is
// unknown.
func (n *node) LiveMemoryUnavailable() string {
	if _, ok := n.monitor(); ok {
		return ""
	}
	return fmt.Sprintf("no gpuportal agent in monitor mode on node %s (the DaemonSet of deploy/kubernetes/monitor.yaml); see docs/kubernetes.md", n.name)
}
