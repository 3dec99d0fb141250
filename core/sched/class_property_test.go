package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// withSessions makes about a third of a snapshot's jobs interactive
// sessions, and, of the others, about one in six high-priority and one
// in six low-priority batch jobs.
func withSessions(rng *rand.Rand, s Snapshot) Snapshot {
	s.Jobs = slices.Clone(s.Jobs)
	for i := range s.Jobs {
		switch rng.IntN(9) {
		case 0, 1, 2:
			s.Jobs[i].Class = ClassSession
		case 3:
			s.Jobs[i].Class = ClassHigh
		case 4:
			s.Jobs[i].Class = ClassLow
		}
	}
	return s
}

// sessionProblems returns what breaks the rules of sessions in d, the
// outcome of one pass over s: a session is preempted only when a team
// under its guarantee reclaims it, borrowed and past the minimum
// runtime, and says so; it never leaves queue 0, nor waits elsewhere.
func sessionProblems(sc *Scheduler, s Snapshot, d Decisions) []string {
	var out []string
	bad := func(f string, args ...any) { out = append(out, fmt.Sprintf(f, args...)) }
	jobs := map[int64]*Job{}
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	var mk map[int64]uint8
	for _, p := range d.Preempts {
		j := jobs[p.JobID]
		if j == nil || j.Class != ClassSession {
			continue
		}
		if mk == nil {
			mk = marks(sc, s)
		}
		switch {
		case !p.Reclaim:
			bad("session %d preempted by the policy for job %d: %s", j.ID, p.For, p.Reason)
		case mk[j.ID]&runBorrowed == 0:
			bad("session %d reclaimed, but it did not borrow", j.ID)
		case !(s.Now-j.LastStartTime >= sc.minRun):
			bad("session %d reclaimed after %v s, under the minimum runtime", j.ID, s.Now-j.LastStartTime)
		}
	}
	for _, c := range d.QueueChanges {
		if j := jobs[c.JobID]; j != nil && j.Class.topQueue() && (c.To != 0 || c.State.Index != 0) {
			bad("%s job %d moved to queue %d (state %d): %s", j.Class, j.ID, c.To, c.State.Index, c.Reason)
		}
	}
	for _, w := range d.Waits {
		if j := jobs[w.JobID]; j != nil && j.Class.topQueue() && w.Queue != 0 {
			bad("%s job %d waits in queue %d: %s", j.Class, j.ID, w.Queue, w.Reason)
		}
	}
	return out
}

// TestSessionInvariants: with sessions among the jobs, every pass under
// every policy and mode, with and without teams, keeps the invariants of
// every pass and the fair-share rules, and the rules of sessions
// (sessionProblems): never preempted but by a reclaim, always in queue 0.
func TestSessionInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 30))
	var snaps []Snapshot
	for _, s := range propertySnapshots(30, 150) {
		snaps = append(snaps, withSessions(rng, s))
	}
	for _, s := range fairSnapshots(31, 150) {
		snaps = append(snaps, withSessions(rng, s))
	}
	for _, cfg := range fairConfigs() {
		sc := mustNew(t, cfg)
		for i, s := range snaps {
			d := sc.Schedule(s)
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Fatalf("%+v, snapshot %d:\n%s", cfg, i, joinProblems(p))
			}
			if p := internalProblems(sc, s); p != "" {
				t.Fatalf("%+v, snapshot %d: %s", cfg, i, p)
			}
			if len(s.Teams) > 0 {
				if p := fairProblems(sc, s, cfg, d); len(p) > 0 {
					t.Fatalf("%+v, snapshot %d:\n%s", cfg, i, joinProblems(p))
				}
			}
			if p := sessionProblems(sc, s, d); len(p) > 0 {
				t.Fatalf("%+v, snapshot %d:\n%s", cfg, i, joinProblems(p))
			}
		}
	}
}

// TestSessionSequences runs sequences of passes, time going by, with
// sessions among the jobs, and checks the rules of sessions at every
// pass: as they run on and attain service they stay in queue 0 (the
// stored state included), and none is preempted but by a reclaim.
func TestSessionSequences(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, cfg := range fairConfigs() {
		if cfg.NoPreemption {
			continue
		}
		sc := mustNew(t, cfg)
		for seq := range 8 {
			s := withSessions(rng, sequenceSnapshot(rng, sc.minRun))
			if seq%2 == 0 {
				s.Teams = nil // the policy alone
			}
			for pass := range 20 {
				d := sc.Schedule(s)
				if p := sessionProblems(sc, s, d); len(p) > 0 {
					t.Fatalf("%+v, sequence %d, pass %d:\n%s", cfg, seq, pass, joinProblems(p))
				}
				applyPass(&s, d)
				for _, j := range s.Jobs {
					if sc.pol.queues != nil && j.Class.topQueue() && j.Queue.Index != 0 {
						t.Fatalf("%+v, sequence %d, pass %d: %s job %d stored in queue %d", cfg, seq, pass, j.Class, j.ID, j.Queue.Index)
					}
				}
				advance(&s, 1+rng.Float64()*2000)
			}
		}
	}
}

// TestSessionLastResort: a session is reclaimed only when no batch job
// would do. Over random clusters with teams, sessions and one waiting
// job J, every pass that reclaims a session for J is checked against the
// same snapshot with every session too young to be reclaimed: there J
// must not start, that is, the batch jobs that borrow (and J's own
// team's batch jobs below it) could not make room for it.
func TestSessionLastResort(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	reclaimed, batchDid := 0, 0
	for _, cfg := range fairConfigs() {
		if cfg.NoPreemption || cfg.MinRuntimeS < 0 {
			continue // no reclaim, or no session can be made too young
		}
		sc := mustNew(t, cfg)
		for k := range 150 {
			s := withSessions(rng, sequenceSnapshot(rng, sc.minRun))
			// Keep one waiting job.
			first := true
			s.Jobs = slices.DeleteFunc(s.Jobs, func(j Job) bool {
				if j.State != Pending {
					return false
				}
				keep := first
				first = false
				return !keep
			})
			d := sc.Schedule(s)
			sessions := false
			for _, p := range d.Preempts {
				for _, j := range s.Jobs {
					if j.ID == p.JobID && j.Class == ClassSession {
						sessions = true
					}
				}
			}
			young := s
			young.Jobs = slices.Clone(s.Jobs)
			for i := range young.Jobs {
				if j := &young.Jobs[i]; j.Class == ClassSession && j.State == Running {
					j.LastStartTime = s.Now
				}
			}
			dy := sc.Schedule(young)
			if sessions {
				reclaimed++
				if len(dy.Starts) > 0 {
					t.Fatalf("%+v, snapshot %d: a session is reclaimed (%+v), but without sessions to reclaim the job starts all the same (%+v)",
						cfg, k, d.Preempts, dy.Preempts)
				}
			} else if len(dy.Starts) > 0 && len(dy.Preempts) > 0 {
				batchDid++
			}
		}
	}
	// The property is not vacuous: both cases occur.
	if reclaimed == 0 || batchDid == 0 {
		t.Fatalf("sessions reclaimed in %d passes, batch jobs made room in %d: the snapshots do not exercise the rule", reclaimed, batchDid)
	}
	t.Logf("sessions reclaimed as a last resort in %d passes; batch jobs made room in %d", reclaimed, batchDid)
}
