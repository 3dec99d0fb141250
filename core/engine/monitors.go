package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// Monitors: where jobs run on another system's machines (Slurm's,
// Kubernetes'), a gpuportal agent in monitor-only mode (gpuportal agent
// --monitor-only) may still watch their GPUs. It registers as the monitor
// of the machine of the same name: the engine does not run jobs through
// it, and the machine's own Node (the Slurm or Kubernetes executor's)
// reads its GPU samples from it (MonitorSamples).

// Monitor is a machine's GPU readings from a monitor-only agent.
type Monitor interface {
	Name() string
	Sample(now time.Time) []gpu.Sample
}

// Monitors finds the monitor of a machine by its name (the Slurm and
// Kubernetes executors' Config.Monitors). *Engine implements it.
type Monitors interface {
	Monitor(name string) (Monitor, bool)
}

// FindMonitor returns the monitor ms finds for the machine name; none
// where ms is nil.
func FindMonitor(ms Monitors, name string) (Monitor, bool) {
	if ms == nil {
		return nil, false
	}
	return ms.Monitor(name)
}

// MonitorSamples returns a sample of each of devs, stamped now: m's sample
// of the GPU of the same index, or, for a GPU m does not report (or
// without a monitor, m nil), the GPU's size and nothing used. That a
// machine's GPU indices are NVML's, which the monitor reports, is the
// caller's to say.
func MonitorSamples(m Monitor, devs []gpu.Device, now time.Time) []gpu.Sample {
	byIndex := make(map[int]gpu.Sample)
	if m != nil {
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

// monitors holds the connected monitors by machine name.
type monitors struct {
	mu     sync.Mutex
	byName map[string]Monitor
}

// AddMonitor connects the monitor of a machine, replacing any earlier
// one of the same name.
func (e *Engine) AddMonitor(_ context.Context, m Monitor) error {
	e.monitors.mu.Lock()
	defer e.monitors.mu.Unlock()
	if e.monitors.byName == nil {
		e.monitors.byName = make(map[string]Monitor)
	}
	e.monitors.byName[m.Name()] = m
	e.cfg.Logger.Info("monitor connected", "node", m.Name())
	return nil
}

// RemoveMonitor disconnects the monitor of a machine.
func (e *Engine) RemoveMonitor(_ context.Context, name string) error {
	e.monitors.mu.Lock()
	defer e.monitors.mu.Unlock()
	if _, ok := e.monitors.byName[name]; !ok {
		return fmt.Errorf("monitor of %s: %w", name, ErrUnknownNode)
	}
	delete(e.monitors.byName, name)
	e.cfg.Logger.Warn("monitor disconnected", "node", name)
	return nil
}

// Monitor returns the monitor of a machine, if one is connected.
func (e *Engine) Monitor(name string) (Monitor, bool) {
	e.monitors.mu.Lock()
	defer e.monitors.mu.Unlock()
	m, ok := e.monitors.byName[name]
	return m, ok
}

// LiveMemoryUnavailable says why a machine's live GPU memory is unknown;
// empty when it is known.
func LiveMemoryUnavailable(n Node) string {
	if lm, ok := n.(LiveMemoryNode); ok {
		return lm.LiveMemoryUnavailable()
	}
	return ""
}
