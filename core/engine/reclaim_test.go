package engine

import (
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// TestSchedJobReclaimAndPriority: what the store says of a reclaimed job
// and of a session asking for priority reaches the scheduler's snapshot,
// and a session's simulated GPU reads 0% utilization.
func TestSchedJobReclaimAndPriority(t *testing.T) {
	e, _ := newTestEngine(t, newMemStore())
	at := t0.Add(-time.Minute)
	session := &job.Session{Type: job.SessionTerminal}
	cases := []struct {
		name            string
		j               Job
		reentered       float64
		interactive     bool
		sessionUtilZero bool
	}{
		{"a reclaimed batch job re-enters at the reclaim", Job{ID: 1, GPUs: 1, SubmittedAt: t0.Add(-time.Hour), ReenteredAt: &at}, seconds(at), false, false},
		{"a session asking for priority", Job{ID: 2, GPUs: 1, SubmittedAt: t0, Session: session, InteractivePriority: true}, 0, true, true},
		{"a batch job asking for priority gets none", Job{ID: 3, GPUs: 1, SubmittedAt: t0, InteractivePriority: true}, 0, false, false},
		{"a session not asking", Job{ID: 4, GPUs: 1, SubmittedAt: t0, Session: session}, 0, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sj := e.schedJob(tc.j, t0, 81920)
			if sj.ReenteredAt != tc.reentered || sj.Interactive != tc.interactive {
				t.Errorf("ReenteredAt %v Interactive %v; want %v %v", sj.ReenteredAt, sj.Interactive, tc.reentered, tc.interactive)
			}
			m := simMemory(tc.j)
			if got := m.UtilPct != nil && *m.UtilPct == 0; got != tc.sessionUtilZero {
				t.Errorf("simulated utilization %v; want 0%%: %v", m.UtilPct, tc.sessionUtilZero)
			}
		})
	}
}
