package sched

import (
	"math"
	"slices"
	"strings"
)

// DefaultHalfLifeS is the half-life of team usage, in seconds: 7 days, as
// Slurm's PriorityDecayHalfLife.
const DefaultHalfLifeS = 7 * 24 * 3600.0

// DefaultMinRuntimeS is how long a borrowed job runs before it may be
// reclaimed, in seconds (Config.MinRuntimeS).
const DefaultMinRuntimeS = 600.0

// NoMinRuntime, as Config.MinRuntimeS, lets a team under its guarantee
// reclaim borrowed GPUs at once, however briefly their jobs have run. A
// flag layer maps a user's zero to it: the core reads a zero
// MinRuntimeS as DefaultMinRuntimeS.
const NoMinRuntime = -1.0

// Team is one team as the fair-share rules see it. The caller fills it
// from its store on every pass; the scheduler keeps nothing.
type Team struct {
	Name string
	// GuaranteeGPUs is the team's guaranteed share: it may always hold
	// this many GPUs, reclaiming them from borrowers if need be. Zero:
	// the team only borrows.
	GuaranteeGPUs int
	// Weight is the team's share of the cluster among borrowers, relative
	// to the other teams' (Slurm's shares). Zero (or not a positive
	// number) means 1.
	Weight float64
	// UsageGPUSeconds is the team's decayed usage: GPU-seconds held by its
	// jobs, each counted at 2^(-age/half-life). The caller keeps it with
	// DecayUsage. Negative or not finite counts as 0.
	UsageGPUSeconds float64
	// MaxGPUsPerUser caps the GPUs one user's running jobs of the team may
	// hold at once; 0 is no cap.
	MaxGPUsPerUser int
	// ReserveAfterS is the team's own bound on a waiting job's wait
	// before the pass reserves GPUs for it (Config.ReserveAfterS): 0 (or
	// not a number) means the server's, negative means never for the
	// team's jobs.
	ReserveAfterS float64
	// UserCaps overrides MaxGPUsPerUser per user (by Job.User); a value
	// of 0 or less there means MaxGPUsPerUser.
	UserCaps map[string]int
	// UserUsage is each user's decayed usage within the team (by
	// Job.User), kept with DecayUsage at the team's half-life. Fair share
	// inside a team orders the team's jobs by it (UserFactor); a user
	// absent from it used nothing. Negative or not finite counts as 0.
	UserUsage map[string]float64
	// InteractiveGPUs is how many GPUs the team's interactive sessions
	// (Job.Interactive) may hold with priority: a waiting one goes ahead
	// of the team's other waiting jobs while the team's running
	// interactive jobs and those moved ahead before it need no more
	// than this. 0: no interactive priority.
	InteractiveGPUs int
}

// CapOf is the most GPUs user's jobs of the team may hold at once; 0 is
// no cap. A waiting job that needs more than this never starts until the
// cap is raised.
func (t Team) CapOf(user string) int {
	if c := t.UserCaps[user]; c > 0 {
		return c
	}
	return max(t.MaxGPUsPerUser, 0)
}

// TeamShare is where a team stands under fair share, with the inputs of
// its fair-share factor, for people (the team lead's and admin's pages).
type TeamShare struct {
	Name          string
	GuaranteeGPUs int
	Weight        float64
	// InUseGPUs is the GPUs its running jobs hold.
	InUseGPUs int
	// BorrowedGPUs is how far it runs beyond its guarantee:
	// max(0, InUseGPUs - GuaranteeGPUs).
	BorrowedGPUs    int
	UsageGPUSeconds float64
	// Entitlement is S, the team's normalized share: its weight over the
	// sum of all teams' weights.
	Entitlement float64
	// UsageShare is U, the team's normalized usage: its decayed usage
	// over the sum of all teams' (0 when nobody used anything).
	UsageShare float64
	// Factor is F = 2^(-U/S), in [0, 1]: 1 for a team that used nothing,
	// 0.5 for one that used exactly its entitlement. Borrowers of teams
	// with a higher factor go first.
	Factor float64
}

// FairShare returns each team's standing: the listed teams in order, then
// teams that only jobs name (with no guarantee, no weight and a factor of
// 0, so that they borrow last), by name. InUseGPUs counts the GPUs of the
// running jobs. A second team of an already-listed name is ignored.
func FairShare(teams []Team, jobs []Job) []TeamShare {
	var ft fairTeams
	ft.build(teams)
	for i := range jobs {
		j := &jobs[i]
		t := ft.index(j.Team)
		if j.holds() {
			ft.t[t].inUse += max(int(clampGPUs(j.GPUs)), 0) * unit
		}
	}
	ft.sortExtra()
	out := make([]TeamShare, len(ft.t))
	for i := range ft.t {
		t := &ft.t[i]
		out[i] = TeamShare{
			Name: t.name, GuaranteeGPUs: t.g / unit, Weight: t.w,
			InUseGPUs: t.inUse / unit, BorrowedGPUs: max(t.inUse-t.g, 0) / unit,
			UsageGPUSeconds: t.usage, Entitlement: t.s, UsageShare: t.u, Factor: t.f,
		}
	}
	return out
}

// DecayUsage returns a team's decayed usage elapsedS seconds after it was
// prev, when the team held GPUs at a steady rate over that time for
// usedGPUSeconds in all. Each GPU-second counts 2^(-age/halfLifeS), so
// that
//
//	U(t+dt) = U(t) 2^(-dt/h) + used * (1 - 2^(-dt/h)) / (dt ln2 / h)
//
// which is exact for a steady rate, so that splitting an interval in two
// gives the same result as one call over the whole of it. The caller calls
// it whenever the rate changes (a job starts or stops) or before a pass. A
// halfLifeS of 0 or less, or infinite, means no decay: prev + used.
func DecayUsage(prev, elapsedS, halfLifeS, usedGPUSeconds float64) float64 {
	if !(elapsedS > 0) || !(halfLifeS > 0) || math.IsInf(halfLifeS, 1) {
		return prev + usedGPUSeconds
	}
	x := elapsedS / halfLifeS * math.Ln2
	keep := math.Exp(-x)
	// (1 - e^-x) / x, accurate for small x too.
	avg := 1.0
	if x > 1e-12 {
		avg = -math.Expm1(-x) / x
	}
	return prev*keep + usedGPUSeconds*avg
}

// fairTeams is the team table of a pass, or of FairShare.
type fairTeams struct {
	t      []fteam
	byName map[string]int32
	listed int     // t[:listed] come from Snapshot.Teams
	wSum   float64 // weights of the listed teams
	uSum   float64 // usage of the listed teams
	on     bool    // some team guarantees GPUs: fair share applies
	capped bool    // some team caps its users
}

// fteam is one team during a pass.
type fteam struct {
	name  string
	g     int // guaranteed GPUs, in units
	w     float64
	usage float64
	s, u  float64 // Entitlement, UsageShare
	f     float64 // fair-share factor
	cap   int
	caps  map[string]int

	inUse int // units of GPUs its jobs hold now (running and started, less preempted)
	// smallest is its smallest job reclaimed in this pass (an index in
	// Snapshot.Jobs), or -1.
	smallest int32
	tent     int // units of GPUs of victims tentatively taken in the current reclaim

	// Reclaim candidates: indices into pass.rents, lowest rank first.
	cross   []int32 // borrowed batch jobs past their minimum runtime
	own     []int32 // every running job of the team the policy may preempt
	crossLo int     // cross[:crossLo] can never be victims again
	ownLo   int
	cur     int // cursor into cross within one reclaim
	// sess are its borrowed jobs of a class the policy never preempts
	// (sessions) past their minimum runtime: reclaimed only after every
	// batch borrower (nextFairVictim). sessLo and scur as crossLo and cur.
	sess         []int32
	sessLo, scur int
	// GPUs that the open (not yet kept or preempted) candidates would
	// free: an upper bound for quick checks.
	crossOpen, ownOpen int
	// Borrowed jobs still short of their minimum runtime (minRunOf):
	// their GPUs, when the first of them may be reclaimed, and its
	// minimum runtime.
	youngGPUs         int
	youngAt, youngRun float64
	// youngBatch is the part of youngGPUs that batch jobs hold: while a
	// team beyond its guarantee has some, its sessions are not reclaimed.
	youngBatch int
}

// build resets the table to the listed teams.
func (ft *fairTeams) build(teams []Team) {
	ft.t = ft.t[:0]
	if ft.byName == nil {
		ft.byName = make(map[string]int32, len(teams))
	} else {
		clear(ft.byName)
	}
	ft.on, ft.capped = false, false
	ft.wSum, ft.uSum = 0, 0
	for i := range teams {
		tm := &teams[i]
		if _, dup := ft.byName[tm.Name]; dup {
			continue
		}
		t := fteam{name: tm.Name, g: min(max(tm.GuaranteeGPUs, 0), maxGuarantee) * unit, w: tm.Weight, usage: tm.UsageGPUSeconds,
			cap: max(tm.MaxGPUsPerUser, 0), caps: tm.UserCaps}
		if !(t.w > 0) || math.IsInf(t.w, 1) {
			t.w = 1
		}
		if !(t.usage >= 0) || math.IsInf(t.usage, 1) {
			t.usage = 0
		}
		ft.on = ft.on || t.g > 0
		ft.capped = ft.capped || t.cap > 0 || hasCap(t.caps)
		ft.wSum += t.w
		ft.uSum += t.usage
		ft.byName[tm.Name] = int32(len(ft.t))
		ft.add(t)
	}
	ft.listed = len(ft.t)
	for i := range ft.t {
		t := &ft.t[i]
		t.s = t.w / ft.wSum
		if ft.uSum > 0 && !math.IsInf(ft.uSum, 1) {
			t.u = t.usage / ft.uSum
		}
		t.f = math.Exp2(-t.u / t.s)
	}
}

func hasCap(caps map[string]int) bool {
	for _, c := range caps {
		if c > 0 {
			return true
		}
	}
	return false
}

// index returns the team of name, adding an unlisted one (no guarantee,
// factor 0) on first sight.
func (ft *fairTeams) index(name string) int32 {
	if i, ok := ft.byName[name]; ok {
		return i
	}
	i := int32(len(ft.t))
	ft.byName[name] = i
	ft.add(fteam{name: name})
	return i
}

// add appends t, reusing the candidate lists of an earlier pass.
func (ft *fairTeams) add(t fteam) {
	t.smallest = -1
	if n := len(ft.t); n < cap(ft.t) {
		old := &ft.t[:n+1][n]
		t.cross, t.own, t.sess = old.cross[:0], old.own[:0], old.sess[:0]
	}
	ft.t = append(ft.t, t)
}

// sortExtra puts the unlisted teams in name order, so that nothing depends
// on the order of the jobs.
func (ft *fairTeams) sortExtra() {
	extra := ft.t[ft.listed:]
	if len(extra) < 2 {
		return
	}
	slices.SortFunc(extra, func(a, b fteam) int { return strings.Compare(a.name, b.name) })
	for i := range extra {
		ft.byName[extra[i].name] = int32(ft.listed + i)
	}
}

// capOf returns the GPUs user may hold in team t; 0 is no cap.
func (t *fteam) capOf(user string) int {
	if c := t.caps[user]; c > 0 {
		return c
	}
	return t.cap
}

// share is Kueue's share of a team holding inUse GPUs: how far beyond its
// guarantee it runs, per unit of weight.
func (t *fteam) share(inUse int) float64 {
	if inUse <= t.g {
		return 0
	}
	w := t.w
	if w == 0 { // an unlisted team
		w = 1
	}
	return float64(inUse-t.g) / unit / w
}
