package sched

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestReserveLead (issue 30, rule 7 of "Reservations"): with a lead
// (Config.ReserveLeadS) the bound is when a job must start. It is due for
// a reservation its lead before the bound, and at the bound it takes its
// GPUs from the batch jobs on them, those that share a GPU too (all of
// them, or none: a shared GPU frees only when every job on it leaves),
// never from a session. Without a lead it is due at the bound and takes
// them at twice the bound.
//
// One machine of 8 GPUs under tiresias-l, bound 300 s. Job 10 asks all 8
// since 0; 1-GPU batch jobs without limits, submitted before it (so
// ranked above it in queue 0) and started at 50 (before it was due,
// so no backfills), hold every GPU; on GPU 7 two of them share.
func TestReserveLead(t *testing.T) {
	const bound = 300
	snap := func(now float64, sessionOn7 bool) Snapshot {
		s := Snapshot{Now: now, Nodes: nodes(8)}
		for i := range 7 {
			s.Jobs = append(s.Jobs, run(int64(i+1), -100, on("node-0", i), ranFrom(50, now)))
		}
		sh := shares(8000, 2000)
		s.Jobs = append(s.Jobs, run(8, -100, on("node-0", 7), ranFrom(50, now), sh))
		if sessionOn7 {
			s.Jobs = append(s.Jobs, run(9, -100, on("node-0", 7), ranFrom(60, now), sh, session))
		} else {
			s.Jobs = append(s.Jobs, run(9, -100, on("node-0", 7), ranFrom(60, now), sh))
		}
		s.Jobs = append(s.Jobs, pend(10, 8, 0))
		return s
	}
	cases := []struct {
		name    string
		lead    float64
		snap    Snapshot
		dueS    float64 // the reservation's DueS; 0: none
		starts  bool
		preempt []int64
	}{
		{name: "no lead, before the bound: not due", snap: snap(200, false)},
		{name: "lead 150, at 200: due since 150, reserved", lead: 150, snap: snap(200, false), dueS: 150},
		{name: "no lead, past the bound: reserved, its deadline (600) ahead", snap: snap(310, false), dueS: 300},
		{name: "lead 150, past the bound (its deadline): takes every GPU, both sharers of GPU 7 too",
			lead: 150, snap: snap(310, false), starts: true, preempt: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{name: "lead 150, past the bound, a session shares GPU 7: nothing taken, reserved", lead: 150, snap: snap(310, true), dueS: 150},
		{name: "no lead, past twice the bound: takes every GPU, both sharers too",
			snap: snap(610, false), starts: true, preempt: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{name: "lead of the bound or more: due at once", lead: 400, snap: snap(20, false), dueS: 0.001},
		{name: "lead of half the bound, at 160: due since 150", lead: LeadHalfBound, snap: snap(160, false), dueS: 150},
		{name: "lead of half the bound, past the bound: takes every GPU",
			lead: LeadHalfBound, snap: snap(310, false), starts: true, preempt: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Policy: "tiresias-l", ReserveAfterS: bound, ReserveLeadS: c.lead}
			d := mustNew(t, cfg).Schedule(c.snap)
			_, started := startOf(d, 10)
			if started != c.starts {
				t.Fatalf("job 10 started: %v, want %v (starts %v, reservations %+v, waits %+v)", started, c.starts, startIDs(d), d.Reservations, d.Waits)
			}
			got := preemptIDs(d)
			slices.Sort(got)
			if !reflect.DeepEqual(got, c.preempt) {
				t.Errorf("preempted %v, want %v", got, c.preempt)
			}
			for _, pr := range d.Preempts {
				if pr.For != 10 || !strings.Contains(pr.Reason, "past its deadline") {
					t.Errorf("preemption %+v: want one for job 10, past its deadline", pr)
				}
				if shared := pr.JobID == 8 || pr.JobID == 9; shared != strings.Contains(pr.Reason, "shared its GPU") {
					t.Errorf("preemption of job %d says %q", pr.JobID, pr.Reason)
				}
			}
			switch {
			case c.dueS == 0 && len(d.Reservations) > 0:
				t.Errorf("reservations %+v, want none", d.Reservations)
			case c.dueS > 0 && (len(d.Reservations) != 1 || d.Reservations[0].JobID != 10 ||
				c.dueS != 0.001 && d.Reservations[0].DueS != c.dueS):
				t.Errorf("reservations %+v, want job 10's, due since %v", d.Reservations, c.dueS)
			}
			if p, _ := checkDecisions(c.snap, cfg, d); len(p) > 0 {
				t.Error(joinProblems(p))
			}
		})
	}
}
