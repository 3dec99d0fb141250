package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
)

// fakeMonitors holds monitor-only agents by node name.
type fakeMonitors map[string]engine.Monitor

func (m fakeMonitors) Monitor(name string) (engine.Monitor, bool) {
	mon, ok := m[name]
	return mon, ok
}

// fakeMonitor is a monitor whose GPUs read the given samples.
type fakeMonitor struct {
	name    string
	samples []gpu.Sample
}

func (m *fakeMonitor) Name() string                  { return m.name }
func (m *fakeMonitor) Sample(time.Time) []gpu.Sample { return m.samples }

// TestMonitorSuppliesANodesReadings: a node's GPU readings are its
// monitor's (the monitor DaemonSet's agent of the same name), for the
// GPUs gpuportal may use; without one, the GPUs' sizes and a reason.
func TestMonitorSuppliesANodesReadings(t *testing.T) {
	mons := fakeMonitors{}
	e := &Executor{cfg: Config{Monitors: mons}}
	// GPU 1 is held by another scheduler's pod: not the node's to use.
	n := &node{e: e, name: "n1", all: 3, devices: []gpu.Device{{Index: 0, MemMiB: 81920}, {Index: 2, MemMiB: 81920}}}
	now := time.Unix(1000, 0)

	if why := engine.LiveMemoryUnavailable(n); !strings.Contains(why, "no gpuportal agent in monitor mode on node n1") {
		t.Errorf("without a monitor: %q", why)
	}
	got := n.Sample(now)
	if len(got) != 2 || got[0].Index != 0 || got[1].Index != 2 || got[0].MemMiB != 81920 || got[0].MemUsedMiB != 0 || !got[0].At.Equal(now) {
		t.Errorf("samples without a monitor: %+v", got)
	}

	mons["n1"] = &fakeMonitor{name: "n1", samples: []gpu.Sample{
		{Index: 0, MemMiB: 81559, MemUsedMiB: 4000}, {Index: 1, MemMiB: 81559, MemUsedMiB: 70000}, {Index: 2, MemMiB: 81559, MemUsedMiB: 9000},
	}}
	if why := engine.LiveMemoryUnavailable(n); why != "" {
		t.Errorf("with a monitor: %q, want none", why)
	}
	got = n.Sample(now)
	if len(got) != 2 || got[0].MemUsedMiB != 4000 || got[1].Index != 2 || got[1].MemUsedMiB != 9000 || !got[1].At.Equal(now) {
		t.Errorf("samples with a monitor: %+v", got)
	}
}
