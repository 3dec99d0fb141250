package cli

import (
	"testing"

	"github.com/gpuportal/gpuportal/api"
)

func TestSharingLines(t *testing.T) {
	tests := []struct {
		name string
		job  api.Job
		want string
	}{
		{"opted in", api.Job{Sharing: true, MemoryEstimate: &api.MemoryEstimate{PersistentMiB: 1587, EphemeralMiB: 8158, Source: "catalogue"}},
			"opted in, estimate P 1587 MiB + E 8158 MiB (catalogue)"},
		{"a fraction", api.Job{Sharing: true, GPUFraction: 0.25}, "0.25 of a GPU"},
	}
	for _, tc := range tests {
		if got := sharingLine(tc.job); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	l := &api.JobLane{Node: "node-0", GPU: 1, Lane: 2, SizeMiB: 7405, LaneJobs: []int64{4}, GPUJobs: []int64{5, 6},
		Held: api.MemoryEstimate{PersistentMiB: 1100, EphemeralMiB: 7000, Source: "measured"}, MaxPeakMiB: 6500, Iterations: 12}
	want := "lane 2 of node-0 GPU 1, 7405 MiB, taking turns with job 4, beside job 5, job 6; " +
		"holds P 1100 MiB + E 7000 MiB (measured), peak 6500 MiB over 12 iterations"
	if got := laneLine(l); got != want {
		t.Errorf("laneLine = %q, want %q", got, want)
	}
}
