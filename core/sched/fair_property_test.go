package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/usage"
)

// withTeams spreads a snapshot's jobs over a few teams (and one team the
// snapshot does not list), with random guarantees, weights, usage, user
// caps, users and start times around the minimum runtime.
func withTeams(rng *rand.Rand, s Snapshot, minRun float64) Snapshot {
	gpus := 0
	for _, n := range s.Nodes {
		gpus += len(n.GPUs)
	}
	nt := 1 + rng.IntN(4)
	s.Teams = nil
	for i := range nt {
		t := Team{Name: "t" + strconv.Itoa(i), GuaranteeGPUs: rng.IntN(gpus/nt + 3)}
		if rng.IntN(3) == 0 {
			t.Weight = float64(1 + rng.IntN(4))
		}
		if rng.IntN(2) == 0 {
			t.UsageGPUSeconds = rng.Float64() * 1e6
		}
		if rng.IntN(4) == 0 {
			t.MaxGPUsPerUser = 1 + rng.IntN(8)
		}
		if rng.IntN(6) == 0 {
			t.UserCaps = map[string]int{"u0": 1 + rng.IntN(8)}
		}
		s.Teams = append(s.Teams, t)
	}
	if s.Teams[0].GuaranteeGPUs == 0 {
		s.Teams[0].GuaranteeGPUs = 1 // fair share on
	}
	s.Jobs = slices.Clone(s.Jobs)
	for i := range s.Jobs {
		j := &s.Jobs[i]
		j.Team = "t" + strconv.Itoa(rng.IntN(nt+1)) // t<nt> is not listed
		j.User = "u" + strconv.Itoa(rng.IntN(3))
		if j.State == Running {
			j.LastStartTime = s.Now - rng.Float64()*2*minRun
		}
	}
	return s
}

// fairSnapshots draws snapshots with teams.
func fairSnapshots(seed uint64, n int) []Snapshot {
	rng := rand.New(rand.NewPCG(seed, 17))
	out := propertySnapshots(seed, n)
	for i := range out {
		out[i] = withTeams(rng, out[i], DefaultMinRuntimeS)
	}
	return out
}

// fairConfigs are the configurations the fair-share property tests sweep.
func fairConfigs() []Config {
	var out []Config
	for _, c := range propertyConfigs() {
		out = append(out, c)
		if c.Placement == PlaceCount {
			c.MinRuntimeS = -1
			out = append(out, c)
		}
	}
	return out
}

// marks returns, per running job ID, the flags the pass gave it when it
// began: whether it borrowed and whether it could be reclaimed.
func marks(sc *Scheduler, s Snapshot) map[int64]uint8 {
	p := new(pass)
	p.run(sc, &s)
	out := map[int64]uint8{}
	for _, r := range p.runs {
		out[s.Jobs[r.job].ID] = r.flags &^ runReclaimed
	}
	return out
}

// fairProblems returns what breaks the fair-share rules in d, the outcome
// of one pass over s under cfg.
func fairProblems(sc *Scheduler, s Snapshot, cfg Config, d Decisions) []string {
	var out []string
	bad := func(f string, args ...any) { out = append(out, fmt.Sprintf(f, args...)) }
	_, a := checkDecisions(s, cfg, d)
	mk := marks(sc, s)
	guarantee := map[string]int{}
	for _, t := range s.Teams {
		if _, dup := guarantee[t.Name]; !dup {
			guarantee[t.Name] = max(t.GuaranteeGPUs, 0)
		}
	}
	running := func(j *Job) bool {
		return j.State == Running && a.preempt[j.ID].JobID == 0 || a.started[j.ID].JobID != 0
	}
	before, preempted, started, after := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		n := jobGPUs(j)
		if j.State == Running {
			before[j.Team] += n
		}
		if a.preempt[j.ID].JobID != 0 {
			preempted[j.Team] += n
		}
		if a.started[j.ID].JobID != 0 {
			started[j.Team] += n
		}
		if running(j) {
			after[j.Team] += n
		}
	}
	var ft fairTeams
	ft.build(s.Teams)
	minRun := sc.minRun
	for _, p := range d.Preempts {
		if !ft.on {
			break // the policy preempts as without teams
		}
		v, f := a.jobs[p.JobID], a.jobs[p.For]
		if v.Team != f.Team && !p.Reclaim {
			if why := rsvPreemptProblem(s, cfg, mk, a, v, f); why != "" {
				bad("job %d of team %s preempted for job %d of team %s without a reclaim (%s)", v.ID, v.Team, f.ID, f.Team, why)
			}
		}
		if !p.Reclaim {
			continue
		}
		switch {
		case v.Team == f.Team:
			bad("job %d reclaimed for its own team's job %d", v.ID, f.ID)
		case mk[v.ID]&runBorrowed == 0:
			bad("job %d of team %s reclaimed, but it did not borrow", v.ID, v.Team)
		case !(s.Now-v.LastStartTime >= minRun):
			bad("job %d reclaimed after %v s, under the minimum runtime", v.ID, s.Now-v.LastStartTime)
		case before[f.Team]-preempted[f.Team] >= guarantee[f.Team]:
			bad("job %d reclaimed for team %s, which was not under its guarantee", v.ID, f.Team)
		}
	}
	// User caps.
	capOf := map[string]int{}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if t, ok := ft.byName[j.Team]; ok {
			if c := ft.t[t].capOf(j.User); c > 0 {
				capOf[j.Team+"/"+j.User] = c
			}
		}
	}
	uBefore, uAfter := map[string]int{}, map[string]int{}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		k := j.Team + "/" + j.User
		if j.State == Running {
			uBefore[k] += jobGPUs(j)
		}
		if running(j) {
			uAfter[k] += jobGPUs(j)
		}
	}
	for u, c := range capOf {
		if uAfter[u] > max(c, uBefore[u]) {
			bad("user %s holds %d GPUs after the pass, cap %d (held %d before)", u, uAfter[u], c, uBefore[u])
		}
	}
	// Borrowed marks.
	if !ft.on {
		if d.Borrowed != nil {
			bad("borrowed %v without fair share", d.Borrowed)
		}
		return out
	}
	if !slices.IsSorted(d.Borrowed) || d.Borrowed == nil {
		bad("borrowed %v: want a sorted, non-nil list", d.Borrowed)
	}
	isB := map[int64]bool{}
	if len(d.ReclaimableAt) != len(d.Borrowed) {
		bad("%d reclaim times for %d borrowed jobs", len(d.ReclaimableAt), len(d.Borrowed))
	}
	for k, id := range d.Borrowed {
		if j := a.jobs[id]; j == nil || !running(j) || isB[id] {
			bad("job %d is marked borrowed but does not run after the pass (or twice)", id)
		}
		isB[id] = true
		// Reclaimable once it has run at least the minimum runtime since
		// its start (this pass's, for a job it starts).
		start := s.Now
		if i := slices.IndexFunc(s.Jobs, func(j Job) bool { return j.ID == id }); i >= 0 && s.Jobs[i].State == Running {
			start = s.Jobs[i].LastStartTime
		}
		if k < len(d.ReclaimableAt) && minRun > 0 && !(d.ReclaimableAt[k] >= start+minRun) && !math.IsNaN(start) {
			bad("borrowed job %d reclaimable at %v, before its start %v and the minimum runtime %v", id, d.ReclaimableAt[k], start, minRun)
		}
	}
	for _, st := range d.Starts {
		if d.IsBorrowed(st.JobID) != isB[st.JobID] {
			bad("start of job %d: IsBorrowed %v, list says %v", st.JobID, d.IsBorrowed(st.JobID), isB[st.JobID])
		}
	}
	// A team's GPUs are counted as the portal counts them (core/usage): a
	// running job that shares a GPU by its share of it.
	held := heldAfter(s, a, running)
	within, total := map[string]float64{}, map[string]float64{}
	for i := range s.Jobs {
		if j := &s.Jobs[i]; running(j) {
			total[j.Team] += held[j.ID]
			if !isB[j.ID] {
				within[j.Team] += held[j.ID]
			}
		}
	}
	const eps = 1e-6
	for team, n := range total {
		g := float64(guarantee[team])
		if within[team] > g+eps || n <= g+eps && math.Abs(within[team]-n) > eps {
			bad("team %s runs %v GPUs, %v not borrowed, guarantee %v", team, n, within[team], g)
		}
	}
	// The bound: a job that fits within its team's guarantee waits only
	// if the free GPUs and the reclaimable ones could not hold it. GPUs
	// that a team's own preemption freed beyond its need, after the job's
	// turn, go in the next pass: they are left out.
	excess := 0
	for _, p := range d.Preempts {
		if !p.Reclaim {
			excess += jobGPUs(a.jobs[p.JobID])
		}
	}
	for _, st := range d.Starts {
		for _, p := range d.Preempts {
			if p.For == st.JobID && !p.Reclaim {
				excess -= jobGPUs(a.jobs[st.JobID])
				break
			}
		}
	}
	if cfg.Placement == PlaceCount && cfg.Policy != "fifo" && !cfg.NoPreemption {
		for _, w := range d.Waits {
			j := a.jobs[w.JobID]
			if j.State != Pending || w.Cause == WaitUserCap || w.Cause == WaitTooLarge || w.Cause == WaitInvalid {
				continue
			}
			n := jobGPUs(j)
			if before[j.Team]+started[j.Team]+n > guarantee[j.Team] {
				continue
			}
			room := a.freeAll - max(excess, 0)
			// Sessions go only when no batch borrower is still short of
			// the minimum runtime (nextFairVictim).
			youngBatch := false
			for i := range s.Jobs {
				v := &s.Jobs[i]
				youngBatch = youngBatch || v.Team != j.Team && v.Class.preemptible() && mk[v.ID]&runYoung != 0
			}
			for i := range s.Jobs {
				v := &s.Jobs[i]
				if v.Team != j.Team && running(v) && mk[v.ID]&runEligible != 0 && after[v.Team] > guarantee[v.Team] &&
					(v.Class.preemptible() || !youngBatch) {
					room += jobGPUs(v)
				}
			}
			if room >= n {
				bad("job %d (team %s, %d GPUs within its guarantee of %d) waits (%s: %s) though %d GPUs are free or reclaimable",
					j.ID, j.Team, n, guarantee[j.Team], w.Cause, w.Reason, room)
			}
		}
	}
	return out
}

// rsvPreemptProblem says why the preemption of job v, of another team than
// job f, for f is not one a reservation makes under fair share; "" when
// it is: f starts in the pass, having waited its bound, and v is a
// backfill, started since f became due, and not a job within its team's
// guarantee that had waited its own bound when it started.
func rsvPreemptProblem(s Snapshot, cfg Config, mk map[int64]uint8, a after, v, f *Job) string {
	bound := func(j *Job) float64 {
		for _, t := range s.Teams {
			if t.Name == j.Team {
				if t.ReserveAfterS != 0 && !math.IsNaN(t.ReserveAfterS) {
					return t.ReserveAfterS
				}
				break
			}
		}
		return cfg.ReserveAfterS
	}
	bf := bound(f)
	// f may take no more guaranteed work: it has run, and unless it asks
	// more GPUs than its team's guarantee, at least its bound or the
	// minimum runtime, whichever is longer (its lend).
	lent := func() bool {
		minRun := cfg.MinRuntimeS
		if minRun == 0 {
			minRun = DefaultMinRuntimeS
		}
		g := 0
		for _, t := range s.Teams {
			if t.Name == f.Team {
				g = t.GuaranteeGPUs
				break
			}
		}
		return f.ExecutedS > 0 && (f.ExecutedS >= max(minRun, bf) || jobGPUs(f) <= g)
	}
	switch {
	case a.started[f.ID].JobID == 0:
		return "it does not start"
	case !(bf > 0) || waitedS(f, s.Now) < bf:
		return "it is not due for a reservation"
	case !(v.LastStartTime >= s.Now-waitedS(f, s.Now)+bf):
		return "the victim started before it was due"
	case mk[v.ID]&runBorrowed == 0 && bound(v) > 0 && waitedS(v, s.Now) >= bound(v) &&
		!(s.Now >= s.Now-waitedS(f, s.Now)+2*bf-cfg.HandoverS && !lent()):
		return "the victim, within its guarantee, had waited its bound, and the reserved job, before its deadline or having run, may not take it"
	}
	return ""
}

// TestFairInvariants: with teams, every pass keeps the invariants of
// every pass (checkDecisions, the pass's own books, the same decisions
// whatever the order of the jobs) and the fair-share rules: only borrowed
// jobs past their minimum runtime are reclaimed, only for teams under
// their guarantee; other teams' jobs are never preempted otherwise; user
// caps hold; the borrowed marks fill each guarantee; and a job within
// its team's guarantee waits only when free and reclaimable GPUs are too
// few (count mode).
func TestFairInvariants(t *testing.T) {
	snaps := fairSnapshots(21, 80)
	rng := rand.New(rand.NewPCG(8, 8))
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
			if p := fairProblems(sc, s, cfg, d); len(p) > 0 {
				t.Fatalf("%+v, snapshot %d:\n%s", cfg, i, joinProblems(p))
			}
			shuffled := s
			shuffled.Jobs = slices.Clone(s.Jobs)
			rng.Shuffle(len(shuffled.Jobs), func(a, b int) {
				shuffled.Jobs[a], shuffled.Jobs[b] = shuffled.Jobs[b], shuffled.Jobs[a]
			})
			if other := sc.Schedule(shuffled); !reflect.DeepEqual(normalize(d), normalize(other)) {
				t.Fatalf("%+v, snapshot %d: the order of jobs changes the decisions\n%+v\n%+v", cfg, i, d, other)
			}
		}
	}
}

// reclaim is one reclaim seen in a sequence of passes.
type reclaimEvent struct {
	pass     int
	by, from string // teams
}

// applyPass applies d to the jobs of s at s.Now, as a caller does.
func applyPass(s *Snapshot, d Decisions) {
	at := map[int64]int{}
	for i := range s.Jobs {
		at[s.Jobs[i].ID] = i
	}
	for _, c := range d.QueueChanges {
		s.Jobs[at[c.JobID]].Queue = c.State
	}
	for _, p := range d.Preempts {
		j := &s.Jobs[at[p.JobID]]
		j.State, j.Placement = Pending, nil
	}
	for _, st := range d.Starts {
		j := &s.Jobs[at[st.JobID]]
		j.State, j.Placement, j.LastStartTime = Running, st.GPUs, s.Now
	}
}

// advance moves the clock by dt: running jobs accrue service.
func advance(s *Snapshot, dt float64) {
	s.Now += dt
	for i := range s.Jobs {
		if j := &s.Jobs[i]; j.State == Running {
			j.ExecutedS += dt
			j.AttainedService += dt * float64(max(j.GPUs, 0))
		}
	}
}

// sequenceSnapshot is a consistent start for a sequence of passes: no
// unschedulable node, running jobs started within the last minimum
// runtimes, guarantees that add up to at most the cluster.
func sequenceSnapshot(rng *rand.Rand, minRun float64) Snapshot {
	s := randomSnapshot(rng, genOpts{
		nodes: 1 + rng.IntN(6), gpusPerNode: 1 + rng.IntN(8), jobs: 5 + rng.IntN(30),
		busy: rng.Float64(), mixedNodes: rng.IntN(2) == 0,
	})
	s = withTeams(rng, s, minRun)
	gpus := 0
	for _, n := range s.Nodes {
		gpus += len(n.GPUs)
	}
	left := gpus
	for i := range s.Teams {
		s.Teams[i].GuaranteeGPUs = min(s.Teams[i].GuaranteeGPUs, left)
		s.Teams[i].MaxGPUsPerUser, s.Teams[i].UserCaps = 0, nil
		left -= s.Teams[i].GuaranteeGPUs
	}
	for i := range s.Jobs {
		s.Jobs[i].GPUs = min(s.Jobs[i].GPUs, gpus) // every job fits the cluster
		if j := &s.Jobs[i]; j.State == Running {
			j.GPUs = len(j.Placement)
		}
	}
	return s
}

// TestNoPingPong runs sequences of passes over random clusters with
// teams, with time going by and no job arriving or finishing, and checks
// that no two teams reclaim from each other back and forth: once team A
// has reclaimed from team B, B never reclaims from A unless A borrowed
// idle GPUs since (in that pass or later): a reclaim leaves A within its
// guarantee, and GPUs lent anew may be reclaimed anew.
func TestNoPingPong(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, cfg := range fairConfigs() {
		if cfg.NoPreemption {
			continue
		}
		sc := mustNew(t, cfg)
		for seq := range 15 {
			s := sequenceSnapshot(rng, sc.minRun)
			var seen []reclaimEvent
			lent := map[string]int{}        // team -> last pass it borrowed anew
			wasBorrowed := map[int64]bool{} // after the previous pass
			for pass := range 25 {
				d := sc.Schedule(s)
				if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
					t.Fatalf("%+v, sequence %d, pass %d:\n%s", cfg, seq, pass, joinProblems(p))
				}
				team := map[int64]string{}
				for _, j := range s.Jobs {
					team[j.ID] = j.Team
				}
				for _, p := range d.Preempts {
					if !p.Reclaim {
						continue
					}
					ev := reclaimEvent{pass, team[p.For], team[p.JobID]}
					for _, e := range seen {
						last, ok := lent[e.by]
						if e.by == ev.from && e.from == ev.by && (!ok || last < e.pass) {
							t.Fatalf("%+v, sequence %d: team %s reclaimed from %s in pass %d, and %s from %s in pass %d (%s)",
								cfg, seq, e.by, e.from, e.pass, ev.by, ev.from, pass, p.Reason)
						}
					}
					seen = append(seen, ev)
				}
				now := map[int64]bool{}
				for _, id := range d.Borrowed {
					now[id] = true
					if !wasBorrowed[id] {
						lent[team[id]] = pass
					}
				}
				wasBorrowed = now
				applyPass(&s, d)
				advance(&s, 1+rng.Float64()*400)
			}
		}
	}
}

// TestReclaimBound runs sequences of passes, at most maxGap seconds apart,
// over random clusters whose guarantees add up to at most their GPUs, and
// checks the bound of docs/fair-share.md: a job that fits within its
// team's guarantee starts within the minimum runtime plus one pass of the
// time it began to wait (count placement, no job arriving or finishing).
func TestReclaimBound(t *testing.T) {
	const maxGap = 400.0
	rng := rand.New(rand.NewPCG(41, 42))
	for _, pol := range Policies() {
		if pol == "fifo" {
			continue // its head-of-line blocking outlasts any bound
		}
		cfg := Config{Policy: pol, Placement: PlaceCount}
		sc := mustNew(t, cfg)
		for seq := range 50 {
			s := sequenceSnapshot(rng, sc.minRun)
			since := map[int64]float64{} // waiting within its guarantee since
			for pass := range 25 {
				d := sc.Schedule(s)
				applyPass(&s, d)
				held := map[string]int{}
				for _, j := range s.Jobs {
					if j.State == Running {
						held[j.Team] += jobGPUs(&j)
					}
				}
				g := map[string]int{}
				for _, tm := range s.Teams {
					g[tm.Name] = tm.GuaranteeGPUs
				}
				for _, j := range s.Jobs {
					if j.State != Pending || held[j.Team]+jobGPUs(&j) > g[j.Team] || j.GPUs <= 0 {
						delete(since, j.ID)
						continue
					}
					t0, ok := since[j.ID]
					if !ok {
						since[j.ID] = s.Now
						continue
					}
					if s.Now-t0 > sc.minRun+maxGap {
						t.Fatalf("%s, sequence %d, pass %d: job %d (team %s, %d GPUs, %d of %d held) has waited within its guarantee since %v, %v s",
							pol, seq, pass, j.ID, j.Team, j.GPUs, held[j.Team], g[j.Team], t0, s.Now-t0)
					}
				}
				advance(&s, 1+rng.Float64()*(maxGap-1))
			}
		}
	}
}

// heldAfter is what each job running after the pass counts for in its
// team's GPUs, as core/usage counts it: on each GPU of its placement (its
// start's, when it started in the pass) the share usage.Shares gives it
// among the jobs running there, once some running job shares; else, and
// when it names no GPU, the GPUs it asks for.
func heldAfter(s Snapshot, a after, running func(*Job) bool) map[int64]float64 {
	on := map[gpu.Ref][]*Job{}
	placement := func(j *Job) []gpu.Ref {
		if st, ok := a.started[j.ID]; ok && st.JobID != 0 {
			return st.GPUs
		}
		return j.Placement
	}
	for i := range s.Jobs {
		if j := &s.Jobs[i]; running(j) {
			for _, g := range placement(j) {
				on[g] = append(on[g], j)
			}
		}
	}
	out := map[int64]float64{}
	sharing := false
	for i := range s.Jobs {
		j := &s.Jobs[i]
		sharing = sharing || running(j) && j.Sharing
		out[j.ID] = float64(jobGPUs(j))
	}
	if !sharing {
		return out // no GPU is shared: every job counts its GPUs
	}
	for _, js := range on {
		for _, j := range js {
			out[j.ID] = 0
		}
	}
	for _, js := range on {
		claims := make([]usage.Claim, len(js))
		for k, j := range js {
			claims[k] = usage.Claim{Sharing: j.Sharing, Fraction: j.GPUFraction}
		}
		for k, sh := range usage.Shares(nil, claims) {
			out[js[k].ID] += sh
		}
	}
	return out
}
