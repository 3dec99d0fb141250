package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// readings is a monitor whose GPUs read the given samples.
type readings []gpu.Sample

func (readings) Name() string                    { return "n1" }
func (r readings) Sample(time.Time) []gpu.Sample { return r }

// TestMonitorSamples: each GPU of a machine gets its monitor's sample of
// the same index, and its size and nothing used where the monitor reports
// no such GPU or there is no monitor; all stamped now.
func TestMonitorSamples(t *testing.T) {
	now := time.Unix(1000, 0)
	devs := []gpu.Device{{Index: 0, MemMiB: 100}, {Index: 2, MemMiB: 200}}
	for _, tc := range []struct {
		name string
		m    Monitor
		want []gpu.Sample
	}{
		{"no monitor", nil, []gpu.Sample{{At: now, Index: 0, MemMiB: 100}, {At: now, Index: 2, MemMiB: 200}}},
		{"by index, others ignored", readings{{Index: 2, MemMiB: 190, MemUsedMiB: 50}, {Index: 1, MemUsedMiB: 9}, {Index: 0, MemMiB: 90, MemUsedMiB: 5}},
			[]gpu.Sample{{At: now, Index: 0, MemMiB: 90, MemUsedMiB: 5}, {At: now, Index: 2, MemMiB: 190, MemUsedMiB: 50}}},
		{"a GPU the monitor misses", readings{{Index: 0, MemMiB: 90, MemUsedMiB: 5}},
			[]gpu.Sample{{At: now, Index: 0, MemMiB: 90, MemUsedMiB: 5}, {At: now, Index: 2, MemMiB: 200}}},
	} {
		got := MonitorSamples(tc.m, devs, now)
		if !slices.EqualFunc(got, tc.want, func(a, b gpu.Sample) bool {
			return a.At.Equal(b.At) && a.Index == b.Index && a.MemMiB == b.MemMiB && a.MemUsedMiB == b.MemUsedMiB
		}) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if _, ok := FindMonitor(nil, "n1"); ok {
		t.Error("FindMonitor without Monitors found one")
	}
}
