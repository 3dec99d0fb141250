package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestUserFairShareOrder(t *testing.T) {
	sweep := func(n int) []Job {
		var js []Job
		for i := range n {
			js = append(js, pend(int64(i+1), 2, float64(i), of("a"), by("ann")))
		}
		return js
	}
	cases := []struct {
		name   string
		usage  map[string]float64
		jobs   []Job
		starts []int64
		behind map[int64]string // waiting job -> reason fragment
	}{{
		name:   "one user: the policy's order",
		usage:  map[string]float64{"ann": 1e6},
		jobs:   sweep(6),
		starts: []int64{1, 2, 3, 4},
	}, {
		name:   "no usage recorded: the policy's order",
		jobs:   append(sweep(6), pend(7, 2, 100, of("a"), by("bob"))),
		starts: []int64{1, 2, 3, 4},
	}, {
		name:   "a teammate with less usage goes before the sweep",
		usage:  map[string]float64{"ann": 1e6, "bob": 10},
		jobs:   append(sweep(6), pend(7, 2, 100, of("a"), by("bob"))),
		starts: []int64{7, 1, 2, 3},
		behind: map[int64]string{4: "behind teammate bob's job 7, whose user has used less of team a's guarantee"},
	}, {
		name:   "the heavier user keeps the policy's order among its own jobs",
		usage:  map[string]float64{"ann": 10, "bob": 1e6},
		jobs:   append(sweep(6), pend(7, 2, 100, of("a"), by("bob"))),
		starts: []int64{1, 2, 3, 4},
	}, {
		name:  "another team's place is unchanged",
		usage: map[string]float64{"ann": 1e6, "bob": 10},
		jobs: []Job{pend(1, 4, 0, of("a"), by("ann")), pend(2, 4, 1, of("c"), by("cy")),
			pend(3, 4, 2, of("a"), by("bob"))},
		starts: []int64{3, 2},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustNew(t, Config{Policy: "fifo", Placement: PlaceCount})
			d := s.Schedule(Snapshot{Now: 1000, Nodes: nodes(8), Jobs: c.jobs, Teams: []Team{
				{Name: "a", GuaranteeGPUs: 8, UserUsage: c.usage}, {Name: "c", GuaranteeGPUs: 8}}})
			got := startIDs(d)
			slices.Sort(got)
			want := slices.Clone(c.starts)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("starts %v, want %v", got, want)
			}
			for id, frag := range c.behind {
				w, ok := waitOf(d, id)
				if !ok || !strings.Contains(w.Reason, frag) {
					t.Errorf("job %d waits (%v): %q, want it to say %q", id, ok, w.Reason, frag)
				}
			}
		})
	}
}

func TestUserShares(t *testing.T) {
	team := Team{Name: "a", GuaranteeGPUs: 8, UserUsage: map[string]float64{"ann": 300, "bob": 100, "gone": math.NaN()}}
	jobs := []Job{run(1, 0, nil, of("a"), by("ann")), pend(2, 2, 0, of("a"), by("cy")), pend(3, 2, 0, of("b"), by("dan"))}
	jobs[0].GPUs = 4
	got := UserShares(team, jobs)
	var names []string
	for _, u := range got {
		names = append(names, u.User)
		if u.ShareGPUs != 2 {
			t.Errorf("%s: share %v GPUs, want 2 (8 over 4 users)", u.User, u.ShareGPUs)
		}
	}
	if want := []string{"ann", "bob", "cy", "gone"}; !slices.Equal(names, want) {
		t.Fatalf("users %v, want %v", names, want)
	}
	if got[0].InUseGPUs != 4 || got[0].UsageShare != 0.75 || got[2].Factor != 1 || got[3].UsageGPUSeconds != 0 {
		t.Errorf("shares %+v", got)
	}
	if math.Abs(got[1].Factor-math.Exp2(-1)) > 1e-12 {
		t.Errorf("bob's factor %v, want 0.5 (used exactly an equal split)", got[1].Factor)
	}
}

// With one user per team, whatever the usage, every policy decides as
// without usage; with more, the team's jobs start in the same number
// (the slots are the team's, its jobs all of one size) and no other
// team's job changes fate.
func TestUserFairSharePreservesDecisions(t *testing.T) {
	for _, pol := range []string{"fifo", "fjf", "tiresias-l"} {
		for seed := range uint64(60) {
			r := rand.New(rand.NewPCG(seed, 7))
			var jobs []Job
			teams := []Team{{Name: "a", GuaranteeGPUs: 4}, {Name: "b", GuaranteeGPUs: 4}}
			for i := range 12 {
				tm := []string{"a", "b"}[r.IntN(2)]
				jobs = append(jobs, pend(int64(i+1), 1+r.IntN(4), float64(r.IntN(50)), of(tm), by(tm+"-1")))
			}
			base := mustNew(t, Config{Policy: pol, Placement: PlaceCount}).Schedule(Snapshot{Now: 100, Nodes: nodes(8), Jobs: jobs, Teams: teams})
			used := slices.Clone(teams)
			for i := range used {
				used[i].UserUsage = map[string]float64{used[i].Name + "-1": r.Float64() * 1e6, "other": r.Float64() * 1e6}
			}
			got := mustNew(t, Config{Policy: pol, Placement: PlaceCount}).Schedule(Snapshot{Now: 100, Nodes: nodes(8), Jobs: jobs, Teams: used})
			if fmt.Sprint(startIDs(got)) != fmt.Sprint(startIDs(base)) {
				t.Fatalf("%s seed %d: one user per team: starts %v, want %v", pol, seed, startIDs(got), startIDs(base))
			}
			// Two users in team a: team b's starts are unchanged.
			two := slices.Clone(jobs)
			for i := range two {
				if two[i].Team == "a" {
					two[i].GPUs = 2
					if r.IntN(2) == 0 {
						two[i].User = "other"
					}
				}
			}
			b0 := mustNew(t, Config{Policy: pol, Placement: PlaceCount}).Schedule(Snapshot{Now: 100, Nodes: nodes(8), Jobs: two, Teams: teams})
			b1 := mustNew(t, Config{Policy: pol, Placement: PlaceCount}).Schedule(Snapshot{Now: 100, Nodes: nodes(8), Jobs: two, Teams: used})
			if len(startIDs(b0)) != len(startIDs(b1)) || teamStarts(b0, two, "b") != teamStarts(b1, two, "b") {
				t.Fatalf("%s seed %d: team b's starts changed: %s, want %s", pol, seed, teamStarts(b1, two, "b"), teamStarts(b0, two, "b"))
			}
		}
	}
}

func teamStarts(d Decisions, jobs []Job, team string) string {
	var ids []int64
	for _, id := range startIDs(d) {
		for _, j := range jobs {
			if j.ID == id && j.Team == team {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return fmt.Sprint(ids)
}
