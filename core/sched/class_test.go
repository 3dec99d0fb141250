package sched

import (
	"slices"
	"strings"
	"testing"
)

// asSession makes a job an interactive session (ClassSession).
func asSession(j *Job) { j.Class = ClassSession }

// TestParseClass: the classes by name, and a clear error for others.
func TestParseClass(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Class
		err  bool
	}{
		{"", ClassBatch, false}, {"batch", ClassBatch, false}, {"session", ClassSession, false},
		{"high", ClassHigh, false}, {"low", ClassLow, false},
		{"Session", 0, true}, {"interactive", 0, true}, {"urgent", 0, true},
	} {
		got, err := ParseClass(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseClass(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if got, err := ParseClass("normal"); err != nil || got != ClassBatch {
			t.Errorf(`ParseClass("normal") = %v, %v; want batch`, got, err)
		}
		if err == nil && tc.in != "" && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

// TestSessionStaysInQueueZero: under every queue policy a session keeps
// queue 0 whatever its service: it is not demoted while it runs (and no
// recheck is asked for its threshold), and one stored in a lower queue
// comes back to queue 0. A batch job of the same service is demoted.
func TestSessionStaysInQueueZero(t *testing.T) {
	for _, policy := range []string{"dlas", "tiresias-l", "tiresias-g"} {
		t.Run(policy, func(t *testing.T) {
			sc := mustNew(t, Config{Policy: policy, Thresholds: []float64{100, 1000}})
			snap := Snapshot{Now: 5000, Nodes: nodes(4), Jobs: []Job{
				run(1, 0, on("node-0", 0), served(2000), asSession),
				run(2, 0, on("node-0", 1), served(2000)),
				pend(3, 1, 10, served(2000), inQueue(2, 2010), asSession),
				run(4, 0, on("node-0", 2), served(50), asSession),
			}}
			d := sc.Schedule(snap)
			for _, c := range d.QueueChanges {
				switch c.JobID {
				case 1, 4:
					t.Errorf("running session %d changed queue: %+v", c.JobID, c)
				case 3:
					if c.To != 0 || c.State.Index != 0 || !strings.Contains(c.Reason, "an interactive session stays in queue 0") {
						t.Errorf("stored session 3: %+v, want back to queue 0 with its reason", c)
					}
				}
			}
			if qc := slices.IndexFunc(d.QueueChanges, func(c QueueChange) bool { return c.JobID == 2 }); qc < 0 || d.QueueChanges[qc].To != 2 {
				t.Errorf("batch job 2 not demoted to queue 2: %+v", d.QueueChanges)
			}
			if qc := slices.IndexFunc(d.QueueChanges, func(c QueueChange) bool { return c.JobID == 3 }); qc < 0 {
				t.Errorf("session 3 stored in queue 2 not moved: %+v", d.QueueChanges)
			}
			// Session 4 (50 GPU-s) would reach 100 at t=5050: no recheck then.
			if d.Recheck == 5050 {
				t.Errorf("recheck at %v: a session's threshold", d.Recheck)
			}
		})
	}
}

// TestSessionNotPreemptedByPolicy: a session that a batch job would
// preempt under the policy (it ranks below: demoted, or longer) keeps
// its GPUs under every preemptive policy, in both placements, with and
// without teams that only cap users; a batch job in its place is
// preempted.
func TestSessionNotPreemptedByPolicy(t *testing.T) {
	for _, policy := range []string{"srtf", "srsf", "dlas", "tiresias-l", "tiresias-g"} {
		for _, place := range []string{PlaceNodes, PlaceCount} {
			for _, class := range []Class{ClassBatch, ClassSession} {
				sc := mustNew(t, Config{Policy: policy, Placement: place, Thresholds: []float64{100}})
				snap := Snapshot{Now: 5000, Nodes: nodes(2), Jobs: []Job{
					run(1, 0, on("node-0", 0, 1), served(4000), lasting(90000), func(j *Job) { j.Class = class }),
					pend(2, 2, 4000, lasting(100)),
				}}
				d := sc.Schedule(snap)
				got := preemptIDs(d)
				if class == ClassSession && len(got) > 0 {
					t.Errorf("%s/%s: session preempted: %+v", policy, place, d.Preempts)
				}
				if class == ClassBatch && !slices.Equal(got, []int64{1}) {
					t.Errorf("%s/%s: batch job not preempted: %+v (the case does not exercise preemption)", policy, place, d.Preempts)
				}
				if class == ClassSession {
					if w, ok := waitOf(d, 2); !ok || w.Cause != WaitCapacity {
						t.Errorf("%s/%s: job 2 waits %+v, want capacity", policy, place, w)
					}
				}
			}
		}
	}
}

// TestSessionOwnTeamNotPreempted: under fair share, a job of the
// session's own team that ranks above it does not preempt it; a batch
// job of the team in the same place is preempted.
func TestSessionOwnTeamNotPreempted(t *testing.T) {
	for _, class := range []Class{ClassBatch, ClassSession} {
		sc := mustNew(t, Config{Policy: "tiresias-l", Thresholds: []float64{100}})
		snap := Snapshot{Now: 5000, Nodes: nodes(2),
			Teams: []Team{{Name: "a", GuaranteeGPUs: 2}, {Name: "b", GuaranteeGPUs: 2}},
			Jobs: []Job{
				run(1, 0, on("node-0", 0, 1), served(4000), of("a"), func(j *Job) { j.Class = class }),
				pend(2, 2, 4000, of("a")),
			}}
		d := sc.Schedule(snap)
		got := preemptIDs(d)
		if class == ClassSession && len(got) > 0 {
			t.Errorf("session preempted by its own team's job: %+v", d.Preempts)
		}
		if class == ClassBatch && !slices.Equal(got, []int64{1}) {
			t.Errorf("batch job not preempted: %+v (the case does not exercise preemption)", d.Preempts)
		}
	}
}

// TestSessionReclaimedLast: a team under its guarantee reclaims other
// teams' borrowed batch jobs before their sessions, its own batch jobs
// below it next, and a session only when those cannot free enough; a
// batch borrower still short of the minimum runtime is waited for
// rather than a session reclaimed. The session's reason says why.
func TestSessionReclaimedLast(t *testing.T) {
	teams := []Team{{Name: "a", GuaranteeGPUs: 6}, {Name: "b", GuaranteeGPUs: 2}}
	// Team b holds all 8 GPUs. Its sessions count first within its
	// guarantee: session 10 is within it; batch jobs 11 and 12 and
	// session 13 borrow.
	jobs := []Job{
		run(10, 0, on("node-0", 0, 1), of("b"), startedAt(0), asSession),
		run(11, 1, on("node-0", 2, 3), of("b"), startedAt(1)),
		run(12, 2, on("node-0", 4, 5), of("b"), startedAt(2), served(3000)),
		run(13, 3, on("node-0", 6, 7), of("b"), startedAt(3), asSession),
	}
	cases := []struct {
		name     string
		need     int // GPUs of team a's job 1
		preempts []int64
	}{
		{"a batch borrower goes, not the session", 2, []int64{12}},
		{"both batch borrowers go, not the session", 4, []int64{11, 12}},
		{"the session goes only when the batch borrowers cannot free enough", 6, []int64{11, 12, 13}},
	}
	for _, policy := range []string{"fifo", "tiresias-l"} {
		for _, place := range []string{PlaceNodes, PlaceCount} {
			for _, tc := range cases {
				t.Run(policy+"/"+place+"/"+tc.name, func(t *testing.T) {
					sc := mustNew(t, Config{Policy: policy, Placement: place, MinRuntimeS: 60})
					js := append(slices.Clone(jobs), pend(1, tc.need, 100, of("a")))
					d := sc.Schedule(Snapshot{Now: 1000, Nodes: nodes(8), Teams: teams, Jobs: js})
					if got := preemptIDs(d); !sameIDs(got, tc.preempts) {
						t.Fatalf("preempts %v, want %v: %+v", got, tc.preempts, d.Preempts)
					}
					if _, ok := startOf(d, 1); !ok {
						t.Errorf("job 1 does not start")
					}
					for _, p := range d.Preempts {
						if !p.Reclaim || p.For != 1 {
							t.Errorf("%+v: want a reclaim for job 1", p)
						}
						isSession := p.JobID == 13
						says := strings.Contains(p.Reason, "a session is reclaimed only as a last resort")
						if says != isSession {
							t.Errorf("job %d's reason %q: last-resort words %v, want %v", p.JobID, p.Reason, says, isSession)
						}
					}
					if w, ok := waitOf(d, 13); ok && !strings.Contains(w.Reason, "last resort") {
						t.Errorf("session 13 waits: %q, want it to say why", w.Reason)
					}
					if d.IsBorrowed(10) {
						t.Errorf("session 10 marked borrowed (%v): a team's sessions fill its guarantee first", d.Borrowed)
					}
				})
			}
		}
	}

	t.Run("a young batch borrower is waited for", func(t *testing.T) {
		sc := mustNew(t, Config{Policy: "tiresias-l", MinRuntimeS: 600})
		js := []Job{
			run(11, 0, on("node-0", 0, 1), of("b"), startedAt(0), asSession),
			run(13, 3, on("node-0", 2, 3), of("b"), startedAt(3), asSession),
			run(10, 4, on("node-0", 4, 5), of("b"), startedAt(4)),
			run(12, 5, on("node-0", 6, 7), of("b"), startedAt(900)), // may be reclaimed from 1500
			pend(1, 4, 100, of("a")),
		}
		d := sc.Schedule(Snapshot{Now: 1000, Nodes: nodes(8), Teams: teams, Jobs: js})
		if len(d.Preempts) > 0 {
			t.Fatalf("preempts %+v: the session went while a batch borrower would do in 500 s", d.Preempts)
		}
		if w, ok := waitOf(d, 1); !ok || w.Cause != WaitReclaim {
			t.Errorf("job 1 waits %+v, want reclaim", w)
		}
		if d.Recheck != 1500 {
			t.Errorf("recheck %v, want 1500", d.Recheck)
		}
		d = sc.Schedule(Snapshot{Now: 1500, Nodes: nodes(8), Teams: teams, Jobs: js})
		if got := preemptIDs(d); !sameIDs(got, []int64{10, 12}) {
			t.Errorf("at 1500 preempts %v, want [10 12]", got)
		}
	})

	t.Run("the reclaiming team's own batch job goes before another team's session", func(t *testing.T) {
		sc := mustNew(t, Config{Policy: "tiresias-l", Thresholds: []float64{100}, MinRuntimeS: 60})
		js := []Job{
			run(11, 0, on("node-0", 0, 1), of("b"), startedAt(0), asSession),
			run(13, 3, on("node-0", 2, 3), of("b"), startedAt(3), asSession),
			run(10, 4, on("node-0", 4, 5), of("b"), startedAt(4)),
			run(20, 5, on("node-0", 6, 7), of("a"), startedAt(5), served(900)),
			pend(1, 4, 100, of("a")),
		}
		d := sc.Schedule(Snapshot{Now: 1000, Nodes: nodes(8), Teams: teams, Jobs: js})
		if got := preemptIDs(d); !sameIDs(got, []int64{10, 20}) {
			t.Fatalf("preempts %v, want [10 20]: %+v", got, d.Preempts)
		}
		// Without team a's own batch job to give way, the session goes:
		// job 1, now of 6 GPUs, needs 4 more than the 2 left free.
		js = slices.DeleteFunc(js, func(j Job) bool { return j.ID == 20 })
		js[len(js)-1].GPUs = 6
		d = sc.Schedule(Snapshot{Now: 1000, Nodes: nodes(8), Teams: teams, Jobs: js})
		if got := preemptIDs(d); !sameIDs(got, []int64{10, 13}) {
			t.Errorf("without job 20: preempts %v, want [10 13]", got)
		}
	})
}

// asHigh and asLow set a batch job's priority.
func asHigh(j *Job) { j.Class = ClassHigh }
func asLow(j *Job)  { j.Class = ClassLow }

// TestBatchPriorities: within its team and queue a high-priority job goes
// ahead of the team's normal jobs and a low-priority one behind them,
// saying why; another team's place is unchanged.
func TestBatchPriorities(t *testing.T) {
	team := func(name string) func(*Job) { return func(j *Job) { j.Team, j.User = name, name+"-user" } }
	cases := []struct {
		name   string
		teams  bool
		jobs   []Job
		starts int64
		why    map[int64]string // a wait reason's part, by job
	}{
		{"high goes ahead of its team's earlier job", true,
			[]Job{pend(1, 1, 0, team("vision")), pend(2, 1, 10, team("vision"), asHigh)},
			2, map[int64]string{1: "behind vision-user's high-priority job 2 (team vision)"}},
		{"low waits behind its team's later job", true,
			[]Job{pend(1, 1, 0, team("vision"), asLow), pend(2, 1, 10, team("vision"))},
			2, map[int64]string{1: "behind vision-user's job 2: a low-priority job waits behind its team's other jobs"}},
		{"high is never ahead of another team's job", true,
			[]Job{pend(1, 1, 0, team("nlp")), pend(2, 1, 10, team("vision"), asHigh)},
			1, nil},
		{"low keeps its place before another team's job", true,
			[]Job{pend(1, 1, 0, team("vision"), asLow), pend(2, 1, 10, team("nlp"))},
			1, nil},
		{"without teams, every job is of one team", false,
			[]Job{pend(1, 1, 0), pend(2, 1, 5, asLow), pend(3, 1, 10, asHigh)},
			3, map[int64]string{1: "high-priority job 3", 2: "a low-priority job waits"}},
		{"a session with priority goes ahead of a high-priority job", true,
			[]Job{pend(1, 1, 0, team("vision"), asHigh), pend(2, 1, 10, team("vision"), asSession, func(j *Job) { j.Interactive = true })},
			2, map[int64]string{1: "interactive session 2"}},
	}
	for _, policy := range []string{"fifo", "tiresias-l", "tiresias-g", "srtf"} {
		for _, tc := range cases {
			t.Run(policy+"/"+tc.name, func(t *testing.T) {
				sc := mustNew(t, Config{Policy: policy})
				snap := Snapshot{Now: 20, Nodes: nodes(1), Jobs: tc.jobs}
				if tc.teams {
					snap.Teams = []Team{{Name: "vision", InteractiveGPUs: 4}, {Name: "nlp"}}
				}
				d := sc.Schedule(snap)
				if got := startIDs(d); len(got) != 1 || got[0] != tc.starts {
					t.Fatalf("starts %v, want [%d]", got, tc.starts)
				}
				for id, want := range tc.why {
					w, ok := waitOf(d, id)
					if !ok || !strings.Contains(w.Reason, want) {
						t.Errorf("job %d waits: %q (found %v), want it to say %q", id, w.Reason, ok, want)
					}
				}
			})
		}
	}
}

// TestHighPriorityStaysInQueueZero: under the queue policies a
// high-priority job is not demoted as it attains service, and one stored
// in a lower queue comes back, saying so.
func TestHighPriorityStaysInQueueZero(t *testing.T) {
	for _, policy := range []string{"dlas", "tiresias-l", "tiresias-g"} {
		t.Run(policy, func(t *testing.T) {
			sc := mustNew(t, Config{Policy: policy, Thresholds: []float64{100, 1000}})
			snap := Snapshot{Now: 5000, Nodes: nodes(4), Jobs: []Job{
				run(1, 0, on("node-0", 0), served(2000), asHigh),
				run(2, 0, on("node-0", 1), served(2000), asLow),
				pend(3, 1, 10, served(2000), inQueue(2, 2010), asHigh),
			}}
			d := sc.Schedule(snap)
			var demotedLow, back bool
			for _, c := range d.QueueChanges {
				switch c.JobID {
				case 1:
					t.Errorf("running high-priority job 1 changed queue: %+v", c)
				case 2:
					demotedLow = c.To == 2
				case 3:
					back = c.To == 0 && strings.Contains(c.Reason, "a high-priority job stays in queue 0")
				}
			}
			if !demotedLow || !back {
				t.Errorf("low job demoted %v, stored high job back in queue 0 %v: %+v", demotedLow, back, d.QueueChanges)
			}
		})
	}
}

// TestLowPriorityReclaimedFirst: of a borrowing team's running jobs, its
// low-priority one fills the guarantee last, so it is the one reclaimed,
// even where the policy ranks it above the team's normal job.
func TestLowPriorityReclaimedFirst(t *testing.T) {
	for _, policy := range []string{"fifo", "tiresias-l"} {
		t.Run(policy, func(t *testing.T) {
			sc := mustNew(t, Config{Policy: policy, MinRuntimeS: NoMinRuntime})
			vision := func(j *Job) { j.Team, j.User = "vision", "v" }
			nlp := func(j *Job) { j.Team, j.User = "nlp", "n" }
			snap := Snapshot{Now: 5000, Nodes: nodes(2), Teams: []Team{{Name: "vision", GuaranteeGPUs: 1}, {Name: "nlp", GuaranteeGPUs: 1}},
				Jobs: []Job{
					run(1, 0, on("node-0", 0), vision, asLow, func(j *Job) { j.LastStartTime = 100 }),
					run(2, 50, on("node-0", 1), vision, func(j *Job) { j.LastStartTime = 200 }),
					pend(3, 1, 4000, nlp),
				}}
			d := sc.Schedule(snap)
			if got := preemptIDs(d); !sameIDs(got, []int64{1}) {
				t.Fatalf("preempted %v, want the low-priority job [1]: %+v", got, d.Preempts)
			}
			if got := startIDs(d); !sameIDs(got, []int64{3}) {
				t.Fatalf("started %v, want [3]", got)
			}
		})
	}
}
