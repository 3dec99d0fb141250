package gpuhist

import (
	"math"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

func TestRollup(t *testing.T) {
	k := gpu.Ref{Node: "n0", Index: 0}
	minute := func(start int64, samples int, avg float64, mx int64, power float64) Aggregate {
		a := Aggregate{GPU: k, Start: start, Step: 60, Samples: samples, MemMiB: 1000, MemUsedAvgMiB: avg, MemUsedMaxMiB: mx, UtilAvgPct: avg / 10, BusySamples: samples}
		if power > 0 {
			a.PowerAvgW, a.PowerSamples = power, samples
		}
		return a
	}
	tests := []struct {
		name string
		in   []Aggregate
		step int64
		want []Aggregate
	}{
		{
			name: "minutes of one hour become one hour, weighted by samples",
			in:   []Aggregate{minute(3600, 60, 100, 150, 100), minute(3660, 20, 500, 900, 0)},
			step: 3600,
			want: []Aggregate{{GPU: k, Start: 3600, Step: 3600, Samples: 80, MemMiB: 1000, MemUsedAvgMiB: 200, MemUsedMaxMiB: 900, UtilAvgPct: 20, BusySamples: 80, PowerAvgW: 100, PowerSamples: 60}},
		},
		{
			name: "minutes of two hours stay apart",
			in:   []Aggregate{minute(3540, 60, 1, 1, 0), minute(3600, 60, 2, 2, 0)},
			step: 3600,
			want: []Aggregate{
				{GPU: k, Start: 0, Step: 3600, Samples: 60, MemMiB: 1000, MemUsedAvgMiB: 1, MemUsedMaxMiB: 1, UtilAvgPct: 0.1, BusySamples: 60},
				{GPU: k, Start: 3600, Step: 3600, Samples: 60, MemMiB: 1000, MemUsedAvgMiB: 2, MemUsedMaxMiB: 2, UtilAvgPct: 0.2, BusySamples: 60},
			},
		},
		{
			name: "hours pass a five-minute roll-up unchanged",
			in:   []Aggregate{{GPU: k, Start: 7200, Step: 3600, Samples: 3600, MemUsedAvgMiB: 5}},
			step: 300,
			want: []Aggregate{{GPU: k, Start: 7200, Step: 3600, Samples: 3600, MemUsedAvgMiB: 5}},
		},
		{
			name: "GPUs are kept apart and sorted",
			in: []Aggregate{
				{GPU: gpu.Ref{Node: "n1", Index: 0}, Start: 0, Step: 60, Samples: 1},
				{GPU: gpu.Ref{Node: "n0", Index: 2}, Start: 60, Step: 60, Samples: 1},
				{GPU: gpu.Ref{Node: "n0", Index: 2}, Start: 0, Step: 60, Samples: 1},
			},
			step: 300,
			want: []Aggregate{
				{GPU: gpu.Ref{Node: "n0", Index: 2}, Start: 0, Step: 300, Samples: 2},
				{GPU: gpu.Ref{Node: "n1", Index: 0}, Start: 0, Step: 300, Samples: 1},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Rollup(tc.in, tc.step)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			for i := range got {
				if !closeAggregate(got[i], tc.want[i]) {
					t.Errorf("[%d] = %+v\nwant  %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func closeAggregate(a, b Aggregate) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	fa, fb := a, b
	fa.MemUsedAvgMiB, fa.UtilAvgPct, fa.PowerAvgW, fa.TempAvgC = 0, 0, 0, 0
	fb.MemUsedAvgMiB, fb.UtilAvgPct, fb.PowerAvgW, fb.TempAvgC = 0, 0, 0, 0
	return fa == fb && near(a.MemUsedAvgMiB, b.MemUsedAvgMiB) && near(a.UtilAvgPct, b.UtilAvgPct) &&
		near(a.PowerAvgW, b.PowerAvgW) && near(a.TempAvgC, b.TempAvgC)
}
