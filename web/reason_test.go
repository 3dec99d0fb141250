package web

import (
	"testing"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// TestReasonIsTheEnginesOnTheLeader: a waiting job shows why the
// engine's last pass says it waits, whose figures the store may lag
// (engine.Engine.WaitReasons); a held or running job, and any job on a
// follower, show the store's.
func TestReasonIsTheEnginesOnTheLeader(t *testing.T) {
	engine := map[int64]string{1: "needs 1 GPU; 0 free; 3 jobs ahead in line", 2: "stale", 3: "stale"}
	tests := []struct {
		name    string
		reasons map[int64]string
		j       models.Job
		want    string
	}{
		{"waiting, leader", engine, models.Job{ID: 1, State: job.Queued, Reason: "needs 1 GPU; 0 free; 9 jobs ahead in line"}, engine[1]},
		{"waiting, follower", nil, models.Job{ID: 1, State: job.Queued, Reason: "needs 1 GPU; 0 free; 9 jobs ahead in line"}, "needs 1 GPU; 0 free; 9 jobs ahead in line"},
		{"held", engine, models.Job{ID: 2, State: job.Queued, HoldReason: "held: account disabled", Reason: "held: account disabled"}, "held: account disabled"},
		{"running", engine, models.Job{ID: 3, State: job.Running, Reason: ""}, ""},
		{"no reason from the engine yet", engine, models.Job{ID: 4, State: job.Queued, Reason: "submitted"}, "submitted"},
	}
	for _, tc := range tests {
		m := &moment{reasons: tc.reasons}
		if got := m.reason(&tc.j); got != tc.want {
			t.Errorf("%s: reason %q, want %q", tc.name, got, tc.want)
		}
	}
}
