package sched

import "testing"

// TestReenteredGoesBehind: a job whose idle GPUs were reclaimed
// re-enters the queue at its back (Job.ReenteredAt): on one GPU, with a
// job that has waited since before the reclaim, the waiting job starts
// and the reclaimed one waits, under every policy that orders by arrival
// or queue entry, whatever the reclaimed job's submit time and service.
func TestReenteredGoesBehind(t *testing.T) {
	reclaimed := func(j *Job) {
		j.ReenteredAt, j.ExecutedS, j.AttainedService, j.LastStartTime = 100, 90, 90, 10
	}
	cases := []struct {
		policy, rule string
		// byService: the least service goes first anyway, whenever
		// the jobs arrived.
		byService bool
	}{
		{"fifo", "", false}, {"fjf", "", false}, {"dlas", "", false},
		{"tiresias-l", "", false}, {"tiresias-l", "queue-entry", false}, {"tiresias-l", "least-service", true},
		{"tiresias-l", RuleReference, false},
	}
	for _, tc := range cases {
		t.Run(tc.policy+"/"+tc.rule, func(t *testing.T) {
			sc := mustNew(t, Config{Policy: tc.policy, Rule: tc.rule})
			snap := Snapshot{Now: 101, Nodes: nodes(1), Jobs: []Job{
				pend(1, 1, 0, reclaimed), // submitted first, reclaimed at 100
				pend(2, 1, 50),           // waiting since 50
			}}
			d := sc.Schedule(snap)
			if len(d.Starts) != 1 || d.Starts[0].JobID != 2 {
				t.Fatalf("starts %+v, want job 2 (the waiting job) only", d.Starts)
			}
			if tc.byService {
				return
			}
			// Without the reclaim, the job submitted first goes first.
			snap.Jobs[0].ReenteredAt = 0
			if d := sc.Schedule(snap); len(d.Starts) != 1 || d.Starts[0].JobID != 1 {
				t.Errorf("without ReenteredAt: starts %+v, want job 1", d.Starts)
			}
			// A job submitted after the reclaim comes after it.
			snap.Jobs[0].ReenteredAt = 100
			snap.Jobs[1].SubmitTime = 100.5
			if d := sc.Schedule(snap); len(d.Starts) != 1 || d.Starts[0].JobID != 1 {
				t.Errorf("a job submitted after the reclaim: starts %+v, want job 1", d.Starts)
			}
		})
	}
}
