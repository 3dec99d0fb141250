package app

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
)

// TestReasonIsTheEnginesOnTheLeader: a waiting job shows why the
// engine's last pass says it waits, whose figures the store may lag
// (engine.Engine.WaitReasons); a held or running job, and any job on a
// follower, show the store's.
func TestReasonIsTheEnginesOnTheLeader(t *testing.T) {
	engine := map[int64]sched.Wait{1: {Reason: "needs 1 GPU; 0 free; 3 jobs ahead in line", Position: 4}, 2: {Reason: "stale", Position: 1}, 3: {Reason: "stale", Position: 2}}
	tests := []struct {
		name  string
		waits map[int64]sched.Wait
		j     models.Job
		want  string
		place int
	}{
		{"waiting, leader", engine, models.Job{ID: 1, State: job.Queued, Reason: "needs 1 GPU; 0 free; 9 jobs ahead in line"}, engine[1].Reason, 4},
		{"waiting, follower", nil, models.Job{ID: 1, State: job.Queued, Reason: "needs 1 GPU; 0 free; 9 jobs ahead in line"}, "needs 1 GPU; 0 free; 9 jobs ahead in line", 0},
		{"held", engine, models.Job{ID: 2, State: job.Queued, HoldReason: "held: account disabled", Reason: "held: account disabled"}, "held: account disabled", 0},
		{"running", engine, models.Job{ID: 3, State: job.Running, Reason: ""}, "", 0},
		{"no reason from the engine yet", engine, models.Job{ID: 4, State: job.Queued, Reason: "submitted"}, "submitted", 0},
	}
	for _, tc := range tests {
		m := &Moment{Waits: tc.waits}
		if got := m.reason(&tc.j); got != tc.want {
			t.Errorf("%s: reason %q, want %q", tc.name, got, tc.want)
		}
		if got := m.position(&tc.j); got != tc.place {
			t.Errorf("%s: position %d, want %d", tc.name, got, tc.place)
		}
	}
}

// TestForecastDoesNotRepeatTheReason: a job kept back by its dependencies
// says why once, in its reason; its forecast (shown beside it on the job's
// page) says only when it will be forecast.
func TestForecastDoesNotRepeatTheReason(t *testing.T) {
	const why = "waits for job 41 to succeed (afterok:41)"
	tests := []struct {
		name string
		j    models.Job
	}{
		{"dependency", models.Job{ID: 1, State: job.Queued, Reason: why, Dependencies: models.Strings{"afterok:41"}}},
		{"array limit", models.Job{ID: 2, State: job.Queued, Reason: why, ArrayLimit: 2}},
	}
	for _, tc := range tests {
		m := &Moment{}
		f := m.forecast(&tc.j)
		if f == nil {
			t.Fatalf("%s: no forecast for a waiting job", tc.name)
		}
		if text := f.Text(time.Now(), time.UTC); strings.Contains(text, why) {
			t.Errorf("%s: forecast %q repeats the reason %q", tc.name, text, why)
		}
		if f.Reason == "" {
			t.Errorf("%s: forecast says nothing of why it is not forecast", tc.name)
		}
	}
}
