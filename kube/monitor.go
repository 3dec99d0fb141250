package kube

import (
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
)

// A node's monitor is the monitor-only gpuportal agent (gpuportal agent
// --monitor-only, the DaemonSet of deploy/kubernetes/monitor.yaml) that
// watches its GPUs: it registers under the node's name, and
// Config.Monitors finds it.

// Sample implements engine.Node: the readings of the node's monitor for
// each GPU gpuportal may use (NVML's GPU i is the node's GPU i, as
// NVIDIA_VISIBLE_DEVICES numbers them); without a monitor, each GPU's
// size and nothing used, since the API server reports no GPU readings.
func (n *node) Sample(now time.Time) []gpu.Sample {
	m, _ := engine.FindMonitor(n.e.cfg.Monitors, n.name)
	return engine.MonitorSamples(m, n.Devices(), now)
}

// LiveMemoryUnavailable implements engine.LiveMemoryNode: the API
// server reports no GPU memory in use, so without a monitor it is
// unknown.
func (n *node) LiveMemoryUnavailable() string {
	if _, ok := engine.FindMonitor(n.e.cfg.Monitors, n.name); ok {
		return ""
	}
	return fmt.Sprintf("no gpuportal agent in monitor mode on node %s (the DaemonSet of deploy/kubernetes/monitor.yaml); see docs/kubernetes.md", n.name)
}
