package slurm

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

func TestMonitorSuppliesANodesLiveMemory(t *testing.T) {
	mons := fakeMonitors{}
	f := newFixture(t, func(c *Config) { c.Monitors = mons }, gpuNode("n1", 2), gpuNode("n2", 2))
	f.ex.Sync(f.ctx)
	n1, n2 := f.eng.node(t, "n1"), f.eng.node(t, "n2")
	for _, n := range []engine.Node{n1, n2} {
		why := engine.LiveMemoryUnavailable(n)
		if !strings.Contains(why, "no gpuportal agent in monitor mode on node "+n.Name()) || !strings.Contains(why, "docs/slurm.md") {
			t.Errorf("%s without a monitor: %q", n.Name(), why)
		}
	}
	mons["n1"] = &fakeMonitor{name: "n1", samples: []gpu.Sample{
		{Index: 1, MemUsedMiB: 30000, MemMiB: 40960, Jobs: []gpu.JobMem{{JobID: 7, MemMiB: 30000}}},
		{Index: 0, MemUsedMiB: 100, MemMiB: 40960},
		{Index: 5, MemUsedMiB: 1}, // no such GPU in Slurm's gres: ignored
	}}
	if why := engine.LiveMemoryUnavailable(n1); why != "" {
		t.Errorf("n1 with a monitor: %q", why)
	}
	now := f.clock.Now()
	ss := n1.Sample(now)
	if len(ss) != 2 || ss[0].MemUsedMiB != 100 || ss[1].MemUsedMiB != 30000 || len(ss[1].Jobs) != 1 || ss[1].Jobs[0].JobID != 7 {
		t.Fatalf("n1 samples = %+v; want the monitor's, by index", ss)
	}
	if !ss[0].At.Equal(now) || ss[1].MemMiB != 40960 {
		t.Errorf("n1 samples = %+v; want stamped now with the monitor's sizes", ss)
	}
	if ss := n2.Sample(now); len(ss) != 2 || ss[0].MemUsedMiB != 0 {
		t.Errorf("n2 samples = %+v; want Slurm's empty ones", ss)
	}
}
