package slurm

import (
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
)

// A Slurm node's monitor is the monitor-only gpuportal agent (gpuportal
// agent --monitor-only) that watches its GPUs: it registers under the
// node's Slurm name, and Config.Monitors finds it.

// Sample implements engine.Node: the readings of the node's monitor-only
// agent, if one is connected: each of Slurm's GPUs gets the monitor's
// sample of the GPU of the same index (Slurm's gres index and NVML's
// agree where gres.conf lists the device files in order, /dev/nvidia0
// first). Slurm itself reports no GPU readings: without a monitor, or for
// a GPU the monitor does not report, the samples carry each GPU's size
// and nothing used.
func (n *node) Sample(now time.Time) []gpu.Sample {
	m, _ := engine.FindMonitor(n.e.cfg.Monitors, n.name)
	return engine.MonitorSamples(m, n.Devices(), now)
}

// LiveMemoryUnavailable implements engine.LiveMemoryNode: Slurm reports
// no GPU memory, so without a monitor it is unknown.
func (n *node) LiveMemoryUnavailable() string {
	if _, ok := engine.FindMonitor(n.e.cfg.Monitors, n.name); ok {
		return ""
	}
	return fmt.Sprintf("no gpuportal agent in monitor mode on node %s; see docs/slurm.md", n.name)
}
