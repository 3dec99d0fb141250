package agent

import "testing"

// TestLaneText: a shared simulated job's log says which lane it ran in
// and with how many others there, never "shared by 1 jobs" while the
// GPU's other lanes hold other jobs.
func TestLaneText(t *testing.T) {
	tests := []struct {
		mib  int64
		jobs int
		want string
	}{
		{11602, 1, "in its own lane of 11602 MiB (other jobs may use the GPU's other lanes)"},
		{8000, 2, "in a lane of 8000 MiB, taking turns with 1 other job there"},
		{8000, 4, "in a lane of 8000 MiB, taking turns with 3 other jobs there"},
	}
	for _, tc := range tests {
		if got := laneText(tc.mib, tc.jobs); got != tc.want {
			t.Errorf("laneText(%d, %d) = %q, want %q", tc.mib, tc.jobs, got, tc.want)
		}
	}
}
