package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
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
			sj := e.schedJob(&tc.j, t0, 81920)
			if sj.ReenteredAt != tc.reentered || sj.Interactive != tc.interactive {
				t.Errorf("ReenteredAt %v Interactive %v; want %v %v", sj.ReenteredAt, sj.Interactive, tc.reentered, tc.interactive)
			}
			if want := tc.j.Session != nil; (sj.Class == sched.ClassSession) != want {
				t.Errorf("class %v; want a session: %v", sj.Class, want)
			}
			m := simMemory(tc.j)
			if got := m.UtilPct != nil && *m.UtilPct == 0; got != tc.sessionUtilZero {
				t.Errorf("simulated utilization %v; want 0%%: %v", m.UtilPct, tc.sessionUtilZero)
			}
		})
	}
}

// TestSchedJobPriority: a batch job's stored priority is its class in
// the scheduler's snapshot; a session is a session whatever it says.
func TestSchedJobPriority(t *testing.T) {
	e, _ := newTestEngine(t, newMemStore())
	for _, tc := range []struct {
		j    Job
		want sched.Class
	}{
		{Job{ID: 1, GPUs: 1, SubmittedAt: t0}, sched.ClassBatch},
		{Job{ID: 2, GPUs: 1, SubmittedAt: t0, Priority: job.PriorityHigh}, sched.ClassHigh},
		{Job{ID: 3, GPUs: 1, SubmittedAt: t0, Priority: job.PriorityLow}, sched.ClassLow},
		{Job{ID: 4, GPUs: 1, SubmittedAt: t0, Priority: job.PriorityHigh, Session: &job.Session{Type: job.SessionTerminal}}, sched.ClassSession},
	} {
		if got := e.schedJob(&tc.j, t0, 81920).Class; got != tc.want {
			t.Errorf("job %d (priority %q): class %v, want %v", tc.j.ID, tc.j.Priority, got, tc.want)
		}
	}
}

// TestPreemptReasonOfSession: a session's preemption says what stopping
// it lost, by its type; a batch job's is the scheduler's reason alone.
func TestPreemptReasonOfSession(t *testing.T) {
	p := sched.Preempt{JobID: 1, For: 2, Reclaim: true, Reason: "reclaimed by team nlp under its guarantee"}
	if got := preemptReason(p, Job{ID: 1}); got != p.Reason {
		t.Errorf("batch job: %q, want %q", got, p.Reason)
	}
	for _, tc := range []struct {
		typ  job.SessionType
		want string
	}{
		{job.SessionTerminal, "a terminal cannot be checkpointed: its shell was ended"},
		{job.SessionJupyter, "Jupyter cannot be checkpointed"},
		{job.SessionWeb, "a web app cannot be checkpointed"},
	} {
		got := preemptReason(p, Job{ID: 1, Session: &job.Session{Type: tc.typ}})
		if !strings.HasPrefix(got, p.Reason+"; ") || !strings.Contains(got, tc.want) {
			t.Errorf("%s session: %q, want the reason and %q", tc.typ, got, tc.want)
		}
	}
}
