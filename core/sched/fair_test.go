package sched

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// of puts a job in a team.
func of(team string) func(*Job) { return func(j *Job) { j.Team = team } }

// by names a job's user.
func by(user string) func(*Job) { return func(j *Job) { j.User = user } }

// startedAt sets when a job's current run began.
func startedAt(t float64) func(*Job) { return func(j *Job) { j.LastStartTime = t } }

// reason checks that a job's wait has the given cause and exact reason.
func reason(id int64, cause WaitCause, text string) func(*testing.T, Decisions) {
	return func(t *testing.T, d Decisions) {
		t.Helper()
		w, ok := waitOf(d, id)
		if !ok || w.Cause != cause || w.Reason != text {
			t.Errorf("job %d waits (%v) with %s:\n  %q\nwant %s:\n  %q", id, ok, w.Cause, w.Reason, cause, text)
		}
	}
}

func all(checks ...func(*testing.T, Decisions)) func(*testing.T, Decisions) {
	return func(t *testing.T, d Decisions) {
		t.Helper()
		for _, c := range checks {
			c(t, d)
		}
	}
}

// borrowed checks Decisions.Borrowed.
func borrowed(ids ...int64) func(*testing.T, Decisions) {
	return func(t *testing.T, d Decisions) {
		t.Helper()
		if ids == nil {
			ids = []int64{}
		}
		if !slices.Equal(d.Borrowed, ids) {
			t.Errorf("borrowed %v, want %v", d.Borrowed, ids)
		}
	}
}

// reclaimedFor checks that job id is reclaimed for job forID by team.
func reclaimedFor(id, forID int64, team string) func(*testing.T, Decisions) {
	return func(t *testing.T, d Decisions) {
		t.Helper()
		for _, p := range d.Preempts {
			if p.JobID == id {
				if !p.Reclaim || p.For != forID || !strings.HasPrefix(p.Reason, "reclaimed by team "+team+" under its guarantee") {
					t.Errorf("job %d: %+v, want reclaimed by team %s for job %d", id, p, team, forID)
				}
				return
			}
		}
		t.Errorf("job %d is not preempted", id)
	}
}

// TestFairShareRules checks each fair-share rule on a hand-made scenario
// whose outcome was derived by hand (docs/fair-share.md).
func TestFairShareRules(t *testing.T) {
	t.Run("fjf", func(t *testing.T) {
		runPolicyCases(t, "fjf", []policyCase{{
			// Without teams b1 (submitted first) would start.
			name:   "a job within its team's guarantee goes ahead of borrowers",
			nodes:  nodes(8),
			teams:  []Team{{Name: "a", GuaranteeGPUs: 8}},
			jobs:   []Job{pend(1, 8, 0, of("b")), pend(2, 8, 10, of("a"))},
			starts: []int64{2},
			waits:  map[int64]WaitCause{1: WaitTeamShare},
			check: all(borrowed(), reason(1, WaitTeamShare,
				"needs 8 GPUs; 0 free; team b holds 0 GPUs and has no guarantee, so this job would borrow: it may take idle GPUs, never other teams' jobs; first in line")),
		}, {
			name:   "idle GPUs are lent, and the borrower is marked",
			nodes:  nodes(8),
			teams:  []Team{{Name: "a", GuaranteeGPUs: 4}},
			jobs:   []Job{pend(1, 8, 0, of("a"))},
			starts: []int64{1},
			check: all(borrowed(1), func(t *testing.T, d Decisions) {
				if !d.IsBorrowed(d.Starts[0].JobID) || d.IsBorrowed(2) {
					t.Errorf("IsBorrowed(%d) = %v, IsBorrowed(2) = %v", d.Starts[0].JobID, d.IsBorrowed(d.Starts[0].JobID), d.IsBorrowed(2))
				}
			}),
		}, {
			// a1 borrows (a has no guarantee) but has run 300 s of 600:
			// b1 waits, and the pass asks to be called at 700+600.
			name:  "reclaim waits for the minimum runtime",
			now:   1000,
			nodes: nodes(8),
			teams: []Team{{Name: "a"}, {Name: "b", GuaranteeGPUs: 8}},
			jobs: []Job{
				run(1, 0, on("node-0", span(0, 8)...), of("a"), startedAt(700)),
				pend(2, 8, 900, of("b")),
			},
			waits: map[int64]WaitCause{2: WaitReclaim},
			check: all(borrowed(1), reason(2, WaitReclaim,
				"needs 8 GPUs; 0 free; team b holds 0 of its 8 guaranteed GPUs; GPUs lent to other teams may be reclaimed in 300 s, once their jobs have run 600 s; first in line"),
				func(t *testing.T, d Decisions) {
					if d.Recheck != 1300 {
						t.Errorf("recheck %v, want 1300", d.Recheck)
					}
					if at, ok := d.Reclaimable(1); !ok || at != 1300 {
						t.Errorf("job 1 reclaimable at %v (%v), want 1300", at, ok)
					}
				}),
		}, {
			name:     "reclaim once the minimum runtime is over, under a non-preemptive policy too",
			now:      1300,
			nodes:    nodes(8),
			teams:    []Team{{Name: "a"}, {Name: "b", GuaranteeGPUs: 8}},
			jobs:     []Job{run(1, 0, on("node-0", span(0, 8)...), of("a"), startedAt(700)), pend(2, 8, 900, of("b"))},
			starts:   []int64{2},
			preempts: []int64{1},
			check:    all(borrowed(), reclaimedFor(1, 2, "b"), reason(1, WaitPreempted, "reclaimed by team b under its guarantee, for job 2; first in line")),
		}, {
			// Job 1 had waited 800 s, past the bound of 300 s, when it
			// started at 800 (it has run 200 s): its reservation's
			// promise, it runs the bound before a reclaim, not the
			// minimum runtime of 30 s.
			name:  "a borrower that had waited its bound runs the bound before a reclaim",
			cfg:   Config{MinRuntimeS: 30, ReserveAfterS: 300},
			now:   1000,
			nodes: nodes(8),
			teams: []Team{{Name: "a"}, {Name: "b", GuaranteeGPUs: 8}},
			jobs: []Job{
				run(1, 0, on("node-0", span(0, 8)...), of("a"), served(200), startedAt(800)),
				pend(2, 8, 950, of("b")),
			},
			waits: map[int64]WaitCause{2: WaitReclaim},
			check: all(borrowed(1), reason(2, WaitReclaim,
				"needs 8 GPUs; 0 free; team b holds 0 of its 8 guaranteed GPUs; GPUs lent to other teams may be reclaimed in 100 s, once their jobs have run 300 s; first in line"),
				func(t *testing.T, d Decisions) {
					if d.Recheck != 1100 {
						t.Errorf("recheck %v, want 1100", d.Recheck)
					}
					if at, ok := d.Reclaimable(1); !ok || at != 1100 {
						t.Errorf("job 1 reclaimable at %v (%v), want 1100", at, ok)
					}
				}),
		}, {
			name:     "and is reclaimed once it has run it",
			cfg:      Config{MinRuntimeS: 30, ReserveAfterS: 300},
			now:      1100,
			nodes:    nodes(8),
			teams:    []Team{{Name: "a"}, {Name: "b", GuaranteeGPUs: 8}},
			jobs:     []Job{run(1, 0, on("node-0", span(0, 8)...), of("a"), served(300), startedAt(800)), pend(2, 8, 950, of("b"))},
			starts:   []int64{2},
			preempts: []int64{1},
			check:    reclaimedFor(1, 2, "b"),
		}, {
			// Job 1 had waited 100 s when it started: the minimum
			// runtime of 30 s is all it is promised.
			name:     "a borrower that had not waited its bound runs the minimum runtime",
			cfg:      Config{MinRuntimeS: 30, ReserveAfterS: 300},
			now:      1000,
			nodes:    nodes(8),
			teams:    []Team{{Name: "a"}, {Name: "b", GuaranteeGPUs: 8}},
			jobs:     []Job{run(1, 700, on("node-0", span(0, 8)...), of("a"), served(200), startedAt(800)), pend(2, 8, 950, of("b"))},
			starts:   []int64{2},
			preempts: []int64{1},
			check:    reclaimedFor(1, 2, "b"),
		}, {
			// Without reservations the bound promises nothing.
			name:     "nor is one held longer without reservations",
			cfg:      Config{MinRuntimeS: 30},
			now:      1000,
			nodes:    nodes(8),
			teams:    []Team{{Name: "a"}, {Name: "b", GuaranteeGPUs: 8}},
			jobs:     []Job{run(1, 0, on("node-0", span(0, 8)...), of("a"), served(200), startedAt(800)), pend(2, 8, 950, of("b"))},
			starts:   []int64{2},
			preempts: []int64{1},
			check:    reclaimedFor(1, 2, "b"),
		}, {
			// b1 is the first job within its guarantee to wait: job 3
			// would borrow the 2 free GPUs, which b1 will need once a1 is
			// reclaimed.
			name:  "nothing is lent while a job within its guarantee waits",
			now:   1000,
			nodes: nodes(8),
			teams: []Team{{Name: "a"}, {Name: "b", GuaranteeGPUs: 8}},
			jobs: []Job{
				run(1, 0, on("node-0", span(0, 6)...), of("a"), startedAt(700)),
				pend(2, 8, 900, of("b")), pend(3, 2, 950, of("c")),
			},
			waits: map[int64]WaitCause{2: WaitReclaim, 3: WaitTeamShare},
			check: reason(3, WaitTeamShare,
				"needs 2 GPUs, which would take it beyond its team's guarantee (team c holds 0 GPUs and has no guarantee); no GPUs are lent while job 2 of team b, within its guarantee, waits for GPUs; 1 job ahead in line"),
		}, {
			// While lending is stopped the borrowers of two teams and
			// two sizes wait in turn, each for its own words: a job of
			// team c after one of d, a 4-GPU job after 2-GPU ones (the
			// words are made once for a run of alike jobs).
			name:  "nothing is lent: each borrower's own team and size",
			now:   1000,
			nodes: nodes(8),
			teams: []Team{{Name: "a"}, {Name: "b", GuaranteeGPUs: 8}},
			jobs: []Job{
				run(1, 0, on("node-0", span(0, 6)...), of("a"), startedAt(700)),
				pend(2, 8, 900, of("b")), pend(3, 2, 950, of("c")), pend(5, 2, 951, of("d")),
				pend(6, 4, 952, of("c")), pend(7, 2, 953, of("c")),
			},
			waits: map[int64]WaitCause{2: WaitReclaim, 3: WaitTeamShare, 5: WaitTeamShare, 6: WaitTeamShare, 7: WaitTeamShare},
			check: func(t *testing.T, d Decisions) {
				const lent = "; no GPUs are lent while job 2 of team b, within its guarantee, waits for GPUs; "
				for id, words := range map[int64]string{
					3: "needs 2 GPUs, which would take it beyond its team's guarantee (team c holds 0 GPUs and has no guarantee)" + lent,
					5: "needs 2 GPUs, which would take it beyond its team's guarantee (team d holds 0 GPUs and has no guarantee)" + lent,
					6: "needs 4 GPUs, which would take it beyond its team's guarantee (team c holds 0 GPUs and has no guarantee)" + lent,
					7: "needs 2 GPUs, which would take it beyond its team's guarantee (team c holds 0 GPUs and has no guarantee)" + lent,
				} {
					if w, _ := waitOf(d, id); !strings.HasPrefix(w.Reason, words) || !strings.HasSuffix(w.Reason, " in line") {
						t.Errorf("job %d waits with %q, want %q then its place in line", id, w.Reason, words)
					}
				}
			},
		}, {
			// b2 is within b's guarantee (2 held + 2 of 4) and waits for
			// a's GPUs; b3 would take b beyond it. The job b3 waits for
			// is its own team's: the reason says so, not "of team b"
			// (audit3 read "no GPUs are lent while job 20 of team
			// vision" on a job of vision).
			name:  "nothing is lent while a job of the same team within its guarantee waits",
			now:   1000,
			nodes: nodes(8),
			teams: []Team{{Name: "a"}, {Name: "b", GuaranteeGPUs: 4}},
			jobs: []Job{
				run(1, 0, on("node-0", span(0, 6)...), of("a"), startedAt(700)),
				run(4, 0, on("node-0", 6, 7), of("b"), startedAt(700)),
				pend(2, 2, 900, of("b")), pend(3, 4, 950, of("b")),
			},
			waits: map[int64]WaitCause{2: WaitReclaim, 3: WaitTeamShare},
			check: reason(3, WaitTeamShare,
				"needs 4 GPUs, which would take it beyond its team's guarantee (team b holds 2 of its 4 guaranteed GPUs); no GPUs are lent while job 2 of its own team, within the guarantee, waits for GPUs; 1 job ahead in line"),
		}, {
			// Every guarantee is taken: nothing is borrowed, nothing is
			// reclaimed, and e waits as without fair share.
			name:  "a job within its team's guarantee is never reclaimed",
			now:   5000,
			nodes: nodes(8),
			teams: []Team{{Name: "c", GuaranteeGPUs: 4}, {Name: "d", GuaranteeGPUs: 4}, {Name: "e", GuaranteeGPUs: 4}},
			jobs: []Job{
				run(1, 0, on("node-0", 0, 1, 2, 3), of("c")),
				run(2, 0, on("node-0", 4, 5, 6, 7), of("d")),
				pend(3, 4, 10, of("e")),
			},
			waits: map[int64]WaitCause{3: WaitCapacity},
			check: all(borrowed(), reason(3, WaitCapacity,
				"needs 4 GPUs; 0 free; team e holds 0 of its 4 guaranteed GPUs, but no other team has lent it GPUs it could reclaim; first in line")),
		}, {
			// b1 would take b beyond its guarantee: it borrows, and a
			// borrower never reclaims. Were it to reclaim a1, a (then 4
			// under its guarantee) would reclaim it back, and so on.
			name:  "a job that does not fit within its team's guarantee borrows, and never reclaims",
			now:   5000,
			nodes: nodes(8),
			teams: []Team{{Name: "a", GuaranteeGPUs: 4}, {Name: "b", GuaranteeGPUs: 4}},
			jobs:  []Job{run(1, 0, on("node-0", span(0, 6)...), of("a")), pend(2, 6, 10, of("b"))},
			waits: map[int64]WaitCause{2: WaitTeamShare},
			check: all(borrowed(1), reason(2, WaitTeamShare,
				"needs 6 GPUs; 2 free; team b holds 0 of its 4 guaranteed GPUs, so this job would borrow: it may take idle GPUs, never other teams' jobs; first in line")),
		}, {
			// b3 comes first but b holds 4 of 3: it is deferred to the
			// borrowers, behind c1 (b's factor is 1/8, c's 1). a1
			// reclaims b2; b then holds 2 of 3, and b3 gets its turn back
			// among the jobs within their guarantee, ahead of c1.
			name:  "a team that loses a reclaimed job gets its room back first",
			now:   5000,
			cfg:   Config{Placement: PlaceCount},
			nodes: nodes(5),
			teams: []Team{{Name: "a", GuaranteeGPUs: 2}, {Name: "b", GuaranteeGPUs: 3, UsageGPUSeconds: 1000}, {Name: "c"}},
			jobs: []Job{
				run(1, 0, on("node-0", 0, 1), of("b")),
				run(2, 1, on("node-0", 2, 3), of("b")),
				pend(3, 1, 2, of("b")), pend(4, 2, 3, of("a")), pend(5, 1, 4, of("c")),
			},
			starts: []int64{3, 4}, preempts: []int64{2},
			waits: map[int64]WaitCause{5: WaitTeamShare},
			check: all(borrowed(), reclaimedFor(2, 4, "a")),
		}, {
			name:  "user caps",
			nodes: nodes(8),
			teams: []Team{{Name: "v", MaxGPUsPerUser: 4, UserCaps: map[string]int{"lin": 6}}},
			jobs: []Job{
				run(1, 0, on("node-0", 0, 1), of("v"), by("ada")),
				pend(2, 4, 1, of("v"), by("ada")),
				pend(3, 4, 2, of("v"), by("lin")),
				pend(4, 2, 3, of("v"), by("bob")),
			},
			starts: []int64{3, 4},
			waits:  map[int64]WaitCause{2: WaitUserCap},
			check: all(borrowed(), reason(2, WaitUserCap,
				"needs 4 GPUs; user ada holds 2 GPUs in team v, whose cap per user is 4; first in line")),
		}, {
			name:   "a job larger than its user's cap says that only a higher cap helps",
			nodes:  nodes(8),
			teams:  []Team{{Name: "v", MaxGPUsPerUser: 2}},
			jobs:   []Job{pend(1, 4, 1, of("v"), by("ada")), pend(2, 2, 2, of("v"), by("ada"))},
			starts: []int64{2},
			waits:  map[int64]WaitCause{1: WaitUserCap},
			check: reason(1, WaitUserCap,
				"needs 4 GPUs, more than the cap of 2 GPUs per user of ada in team v: it cannot start until the cap is raised; first in line"),
		}, {
			name:  "a cap of one GPU, and one held, in the singular",
			nodes: nodes(8),
			teams: []Team{{Name: "v", MaxGPUsPerUser: 1}},
			jobs: []Job{
				run(1, 0, on("node-0", 0), of("v"), by("ada")),
				pend(2, 2, 1, of("v"), by("bob")),
				pend(3, 1, 2, of("v"), by("ada")),
			},
			waits: map[int64]WaitCause{2: WaitUserCap, 3: WaitUserCap},
			check: all(
				reason(2, WaitUserCap, "needs 2 GPUs, more than the cap of 1 GPU per user of bob in team v: it cannot start until the cap is raised; first in line"),
				reason(3, WaitUserCap, "needs 1 GPU; user ada holds 1 GPU in team v, whose cap per user is 1; 1 job ahead in line")),
		}, {
			// x used everything so far: F = 2^-(1/(1/3)) = 1/8 against
			// y's 1. y's borrower goes first though it came later.
			name:   "borrowers go in order of their team's fair-share factor",
			nodes:  nodes(8),
			teams:  []Team{{Name: "x", UsageGPUSeconds: 1000}, {Name: "y"}, {Name: "z", GuaranteeGPUs: 1}},
			jobs:   []Job{pend(1, 8, 0, of("x")), pend(2, 8, 10, of("y"))},
			starts: []int64{2},
			waits:  map[int64]WaitCause{1: WaitTeamShare},
		}})
	})
	t.Run("tiresias-l", func(t *testing.T) {
		served8000 := []func(*Job){served(1000), inQueue(2, 500)}
		runPolicyCases(t, "tiresias-l", []policyCase{{
			// vision is within its guarantee, and its own jobs hold both
			// GPUs, ranked above job 3 (in its queue before it). What
			// preemption could free at most, 2, would be enough: the
			// reason said "would free only 2 more" to a job that needs
			// 1 (serve --dev's two teams, seen from the CLI).
			name:  "a job its own team's higher-ranked jobs keep waiting is not told preemption would free too little",
			now:   1000,
			nodes: nodes(2),
			teams: []Team{{Name: "vision", GuaranteeGPUs: 4}, {Name: "nlp", GuaranteeGPUs: 4}},
			jobs: []Job{
				run(1, 0, on("node-0", 0), of("vision"), startedAt(900)),
				run(2, 0, on("node-0", 1), of("vision"), startedAt(900)),
				pend(3, 1, 950, of("vision")),
			},
			waits: map[int64]WaitCause{3: WaitCapacity},
			check: reason(3, WaitCapacity, "needs 1 GPU; 0 free; the busy GPUs are held by jobs it may not preempt; first in queue 0"),
		}, {
			// Within its guarantee, job 3 needs 3 GPUs: 1 is free, its
			// own team holds 1, and nlp's 2 are within nlp's guarantee:
			// preemption could free at most 1, short of 3.
			name:  "a job preemption could not make room for is told how little it would free",
			now:   1000,
			nodes: nodes(4),
			teams: []Team{{Name: "vision", GuaranteeGPUs: 4}, {Name: "nlp", GuaranteeGPUs: 2}},
			jobs: []Job{
				run(1, 0, on("node-0", 0), of("vision"), startedAt(900)),
				run(2, 0, on("node-0", 1, 2), of("nlp"), startedAt(900)),
				pend(3, 3, 950, of("vision")),
			},
			waits: map[int64]WaitCause{3: WaitCapacity},
			check: reason(3, WaitCapacity, "needs 3 GPUs; 1 free; preempting what it may would free only 1 more; first in queue 0"),
		}, {
			// c holds 12 of 4 (8 beyond), d 8 of 4 (4 beyond): c is the
			// furthest over, and c3 (the youngest) its lowest-ranked job.
			name:  "reclaim from the team furthest beyond its guarantee, its lowest-ranked borrowed job",
			now:   1000,
			nodes: nodes(8, 8, 8),
			teams: []Team{{Name: "c", GuaranteeGPUs: 4}, {Name: "d", GuaranteeGPUs: 4}, {Name: "e", GuaranteeGPUs: 8}},
			jobs: []Job{
				run(1, 0, on("node-0", 0, 1, 2, 3), of("c"), served(100)),
				run(2, 100, on("node-0", 4, 5, 6, 7), of("c"), served(100)),
				run(3, 200, on("node-1", 0, 1, 2, 3), of("c"), served(100)),
				run(4, 0, on("node-1", 4, 5, 6, 7), of("d"), served(100)),
				run(5, 100, on("node-2", 0, 1, 2, 3), of("d"), served(100)),
				pend(6, 8, 900, of("e")),
			},
			starts: []int64{6}, preempts: []int64{3},
			check: all(reclaimedFor(3, 6, "e"), borrowed(2, 5),
				func(t *testing.T, d Decisions) {
					want := "reclaimed by team e under its guarantee, for job 6 (team e holds 0 of its 8 guaranteed GPUs); this job borrowed: team c holds 12 GPUs, 8 beyond its guarantee of 4"
					if d.Preempts[0].Reason != want {
						t.Errorf("reason %q\nwant %q", d.Preempts[0].Reason, want)
					}
				}),
		}, {
			// With weight 4, c's share is 8/4 = 2, below d's 4/1.
			name:  "the weight divides how far a team is over its guarantee",
			now:   1000,
			nodes: nodes(8, 8, 8),
			teams: []Team{{Name: "c", GuaranteeGPUs: 4, Weight: 4}, {Name: "d", GuaranteeGPUs: 4}, {Name: "e", GuaranteeGPUs: 8}},
			jobs: []Job{
				run(1, 0, on("node-0", 0, 1, 2, 3), of("c"), served(100)),
				run(2, 100, on("node-0", 4, 5, 6, 7), of("c"), served(100)),
				run(3, 200, on("node-1", 0, 1, 2, 3), of("c"), served(100)),
				run(4, 0, on("node-1", 4, 5, 6, 7), of("d"), served(100)),
				run(5, 100, on("node-2", 0, 1, 2, 3), of("d"), served(100)),
				pend(6, 8, 900, of("e")),
			},
			starts: []int64{6}, preempts: []int64{5},
			check: reclaimedFor(5, 6, "e"),
		}, {
			name:     "within a team the policy still preempts",
			nodes:    nodes(8),
			teams:    []Team{{Name: "a", GuaranteeGPUs: 8}},
			jobs:     []Job{run(1, 0, on("node-0", span(0, 8)...), append(served8000, of("a"))...), pend(2, 8, 2000, of("a"))},
			starts:   []int64{2},
			preempts: []int64{1},
			check: func(t *testing.T, d Decisions) {
				if p := d.Preempts[0]; p.Reclaim || !strings.HasPrefix(p.Reason, "preempted for job 2") {
					t.Errorf("preempt %+v", p)
				}
			},
		}, {
			// Without teams job 2 (queue 0) would preempt job 1 (queue 2).
			name:  "a borrower never preempts another team's job",
			nodes: nodes(8),
			teams: []Team{{Name: "z", GuaranteeGPUs: 1}},
			jobs:  []Job{run(1, 0, on("node-0", span(0, 8)...), append(served8000, of("a"))...), pend(2, 8, 2000, of("b"))},
			waits: map[int64]WaitCause{2: WaitTeamShare},
			check: reason(2, WaitTeamShare,
				"needs 8 GPUs; 0 free; team b holds 0 GPUs and has no guarantee, so this job would borrow: it may take idle GPUs, never other teams' jobs; first in queue 0"),
		}})
	})
}

// TestTeamsWithoutGuarantees checks that teams that guarantee nothing and
// cap no one change nothing: the pass is the pass without teams.
func TestTeamsWithoutGuarantees(t *testing.T) {
	snaps := propertySnapshots(11, 150)
	teams := []Team{{Name: "a", Weight: 2, UsageGPUSeconds: 1e6}, {Name: "b", UserCaps: map[string]int{"x": 0}}}
	for _, cfg := range propertyConfigs() {
		sc := mustNew(t, cfg)
		for i, s := range snaps {
			for k := range s.Jobs {
				s.Jobs[k].Team = []string{"a", "b", "c"}[k%3]
			}
			want := sc.Schedule(s)
			s.Teams = teams
			if got := sc.Schedule(s); !sameDecisions(got, want) {
				t.Fatalf("%+v, snapshot %d: teams without guarantees change the pass\n%+v\n%+v", cfg, i, got, want)
			}
		}
	}
}

func sameDecisions(a, b Decisions) bool {
	return reflectEqual(normalize(a), normalize(b))
}

func TestDecayUsage(t *testing.T) {
	const h = DefaultHalfLifeS
	cases := []struct {
		name                 string
		prev, dt, half, used float64
		want                 float64
	}{
		{"no time, no decay", 100, 0, h, 5, 105},
		{"a half-life halves what was used", 100, h, h, 0, 50},
		{"two half-lives quarter it", 100, 2 * h, h, 0, 25},
		// A steady GPU over one half-life: integral of 2^-(h-t)/h dt
		// from 0 to h = h/(2 ln 2).
		{"a steady GPU over a half-life", 0, h, h, h, h / (2 * math.Ln2)},
		{"no half-life: no decay", 100, 1e9, 0, 7, 107},
		{"an infinite half-life: no decay", 100, 1e9, math.Inf(1), 7, 107},
	}
	for _, c := range cases {
		if got := DecayUsage(c.prev, c.dt, c.half, c.used); math.Abs(got-c.want) > 1e-9*math.Max(1, c.want) {
			t.Errorf("%s: DecayUsage(%v, %v, %v, %v) = %v, want %v", c.name, c.prev, c.dt, c.half, c.used, got, c.want)
		}
	}
}

// TestDecayUsageClosedForm: usage built step by step at a steady rate
// matches the closed form U(T) = U0 2^(-T/h) + r h/ln2 (1 - 2^(-T/h)),
// however the time is split.
func TestDecayUsageClosedForm(t *testing.T) {
	const h, rate, u0 = 3600.0, 8.0, 5000.0
	for _, steps := range []int{1, 2, 7, 1000} {
		for _, total := range []float64{1, 600, 3600, 86400} {
			u := u0
			dt := total / float64(steps)
			for range steps {
				u = DecayUsage(u, dt, h, rate*dt)
			}
			k := math.Exp2(-total / h)
			want := u0*k + rate*h/math.Ln2*(1-k)
			if math.Abs(u-want) > 1e-9*want {
				t.Errorf("%d steps over %v s: %v, want %v", steps, total, u, want)
			}
		}
	}
}

func TestFairShare(t *testing.T) {
	teams := []Team{
		{Name: "vision", GuaranteeGPUs: 16, Weight: 1, UsageGPUSeconds: 3000},
		{Name: "nlp", GuaranteeGPUs: 8, Weight: 3, UsageGPUSeconds: 1000},
		{Name: "vision", GuaranteeGPUs: 99}, // a duplicate: ignored
	}
	jobs := []Job{
		run(1, 0, on("n", span(0, 8)...), of("vision")),
		run(2, 0, on("n", span(0, 12)...), of("nlp")),
		pend(3, 4, 0, of("nlp")),
		run(4, 0, on("n", 0, 1), of("ghost")),
	}
	got := FairShare(teams, jobs)
	// S = 1/4 and 3/4; U = 3/4 and 1/4; F = 2^-3 and 2^-(1/3).
	want := []TeamShare{
		{Name: "vision", GuaranteeGPUs: 16, Weight: 1, InUseGPUs: 8, UsageGPUSeconds: 3000, Entitlement: 0.25, UsageShare: 0.75, Factor: 0.125},
		{Name: "nlp", GuaranteeGPUs: 8, Weight: 3, InUseGPUs: 12, BorrowedGPUs: 4, UsageGPUSeconds: 1000, Entitlement: 0.75, UsageShare: 0.25, Factor: math.Exp2(-1.0 / 3)},
		{Name: "ghost", InUseGPUs: 2, BorrowedGPUs: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if math.Abs(g.Factor-w.Factor) > 1e-12 || math.Abs(g.Entitlement-w.Entitlement) > 1e-12 || math.Abs(g.UsageShare-w.UsageShare) > 1e-12 {
			t.Errorf("%s: %+v, want %+v", w.Name, g, w)
		}
		g.Factor, g.Entitlement, g.UsageShare = w.Factor, w.Entitlement, w.UsageShare
		if g != w {
			t.Errorf("got %+v, want %+v", g, w)
		}
	}
	if f := FairShare([]Team{{Name: "a"}, {Name: "b"}}, nil); f[0].Factor != 1 || f[1].Factor != 1 || f[0].Weight != 1 {
		t.Errorf("no usage: %+v, want factor 1 and weight 1", f)
	}
}

func reflectEqual(a, b Decisions) bool { return reflect.DeepEqual(a, b) }
