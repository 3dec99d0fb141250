package sched

import (
	"strings"
	"testing"
)

// TestInteractivePriority: a team's interactive sessions go ahead of its
// other waiting jobs, within the GPUs the team allows them, and never
// ahead of another team's jobs.
func TestInteractivePriority(t *testing.T) {
	session := func(j *Job) { j.Interactive = true }
	team := func(name string) func(*Job) { return func(j *Job) { j.Team, j.User = name, name+"-user" } }
	cases := []struct {
		name   string
		budget int // vision's InteractiveGPUs
		free   int // GPUs of the one node
		jobs   []Job
		starts []int64
		why    map[int64]string // a wait reason's part, by job
	}{
		{"a session goes ahead of its team's batch job", 2, 1,
			[]Job{pend(1, 1, 0, team("vision")), pend(2, 1, 10, team("vision"), session)},
			[]int64{2}, map[int64]string{1: "behind vision-user's interactive session 2"}},
		{"no priority where the team gives none", 0, 1,
			[]Job{pend(1, 1, 0, team("vision")), pend(2, 1, 10, team("vision"), session)},
			[]int64{1}, nil},
		{"not beyond the team's budget, counting its running sessions", 2, 3,
			[]Job{run(3, 0, on("node-0", 0), team("vision"), session), pend(1, 1, 0, team("vision")), pend(2, 2, 10, team("vision"), session)},
			[]int64{1}, nil},
		{"never ahead of another team's job", 2, 1,
			[]Job{pend(1, 1, 0, team("nlp")), pend(2, 1, 10, team("vision"), session)},
			[]int64{1}, nil},
		{"a job that does not ask keeps its place", 2, 1,
			[]Job{pend(1, 1, 0, team("vision")), pend(2, 1, 10, team("vision"))},
			[]int64{1}, nil},
	}
	for _, policy := range []string{"fifo", "tiresias-l"} {
		for _, tc := range cases {
			t.Run(policy+"/"+tc.name, func(t *testing.T) {
				sc := mustNew(t, Config{Policy: policy})
				snap := Snapshot{Now: 20, Nodes: nodes(tc.free), Jobs: tc.jobs,
					Teams: []Team{{Name: "vision", InteractiveGPUs: tc.budget}, {Name: "nlp"}}}
				d := sc.Schedule(snap)
				var got []int64
				for _, s := range d.Starts {
					got = append(got, s.JobID)
				}
				if len(got) != len(tc.starts) || (len(got) > 0 && got[0] != tc.starts[0]) {
					t.Fatalf("starts %v, want %v", got, tc.starts)
				}
				for id, want := range tc.why {
					found := false
					for _, w := range d.Waits {
						if w.JobID == id {
							found = strings.Contains(w.Reason, want)
							if !found {
								t.Errorf("job %d waits: %q, want it to say %q", id, w.Reason, want)
							}
						}
					}
					if !found {
						t.Errorf("job %d has no wait reason saying %q", id, want)
					}
				}
			})
		}
	}
}
