package slurm

import (
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
)

// Monitors finds the monitor-only gpuportal agent (gpuportal agent
// --monitor-only) that watches a Slurm node's GPUs: it registers under
// the node's Slurm name. *engine.Engine implements it.
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

// monitorSamples reads the node's GPUs through its monitor: each of
// Slurm's GPUs gets the monitor's sample of the GPU of the same index
// (Slurm's gres index and NVML's agree where gres.conf lists the device
// files in order, /dev/nvidia0 first). It reports false without a
// monitor.
func (n *node) monitorSamples(devs []gpu.Device, now time.Time) ([]gpu.Sample, bool) {
	m, ok := n.monitor()
	if !ok {
		return nil, false
	}
	byIndex := make(map[int]gpu.Sample)
	for _, s := range m.Sample(now) {
		byIndex[s.Index] = s
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
	return out, true
}

// LiveMemoryUnavailable implements engine.LiveMemoryNode: Slurm reports
// no GPU memory, so without a monitor it is unknown.
func (n *node) LiveMemoryUnavailable() string {
	if _, ok := n.monitor(); ok {
		return ""
	}
	return fmt.Sprintf("no gpuportal agent in monitor mode on node %s; see docs/slurm.md", n.name)
}
