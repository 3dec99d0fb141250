package sim

import (
	"math"
	"slices"
	"strings"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// teams keeps, per team, what the scheduler needs (decayed usage) and what
// the report shows (GPU-seconds held and borrowed, reclaims). Between two
// events a team holds a steady number of GPUs, so usage decays exactly
// (sched.DecayUsage).
type teams struct {
	t      []simTeam
	byName map[string]int
	half   float64 // usage half-life, seconds; 0 or less: no decay
	last   float64 // when advance last ran
	sched  []sched.Team
	show   bool // the scheduler sees the teams
	fair   bool // and some team guarantees GPUs: fair share applies
}

type simTeam struct {
	trace.Team
	listed  bool
	held    int // GPUs its running jobs hold now
	pending int // GPUs its waiting jobs ask for now

	usage              float64 // decayed GPU-seconds
	gpuSeconds         float64
	borrowedGPUSeconds float64 // GPU-seconds held beyond the guarantee
	reclaims           int     // preemptions made for its jobs by reclaim
	reclaimed          int     // preemptions of its jobs by reclaim

	// Of its guarantee, what it could use (min(G, held + pending)) and
	// what it held (min(G, held)), integrated over time.
	owed, got float64
	// waitWithin sums the time its jobs waited while they fitted within
	// its guarantee; maxWaitWithin is the longest such wait of one job.
	waitWithin, maxWaitWithin float64
}

// newTeams sets up the teams of cfg and of the jobs, which it points at
// their team; nil when cfg lists none.
func newTeams(cfg Config, jobs []job) *teams {
	if len(cfg.Teams) == 0 {
		return nil
	}
	ts := &teams{byName: map[string]int{}, half: cfg.HalfLifeS, show: !cfg.NoFairShare}
	if ts.half == 0 {
		ts.half = sched.DefaultHalfLifeS
	}
	for _, t := range cfg.Teams {
		if _, dup := ts.byName[t.Name]; !dup {
			ts.byName[t.Name] = len(ts.t)
			ts.t = append(ts.t, simTeam{Team: t, listed: true})
			ts.fair = ts.fair || ts.show && t.GuaranteeGPUs > 0
		}
	}
	var extra []string
	seen := map[string]bool{}
	for i := range jobs {
		name := jobs[i].tj.Team
		if _, listed := ts.byName[name]; !listed && !seen[name] {
			seen[name] = true
			extra = append(extra, name)
		}
	}
	slices.SortFunc(extra, strings.Compare)
	for _, name := range extra {
		ts.byName[name] = len(ts.t)
		ts.t = append(ts.t, simTeam{Team: trace.Team{Name: name}})
	}
	for i := range jobs {
		jobs[i].team = ts.byName[jobs[i].tj.Team]
	}
	ts.sched = make([]sched.Team, 0, len(cfg.Teams))
	return ts
}

// advance brings every team's counts to time t; active are the arrived
// jobs, finished ones possibly among them. Nothing changes between two
// events, so the counts are exact.
func (ts *teams) advance(t float64, active []*job) {
	dt := t - ts.last
	if !(dt > 0) {
		return
	}
	from := ts.last
	ts.last = t
	for i := range ts.t {
		st := &ts.t[i]
		if g := st.GuaranteeGPUs; g > 0 {
			st.owed += float64(min(g, st.held+st.pending)) * dt
			st.got += float64(min(g, st.held)) * dt
		}
		if st.held == 0 && st.usage == 0 {
			continue
		}
		used := float64(st.held) * dt
		st.usage = sched.DecayUsage(st.usage, dt, ts.half, used)
		st.gpuSeconds += used
		st.borrowedGPUSeconds += float64(max(st.held-st.GuaranteeGPUs, 0)) * dt
	}
	for _, j := range active {
		if j.running || j.done {
			continue
		}
		st := &ts.t[j.team]
		if st.held+j.tj.GPUs > st.GuaranteeGPUs {
			j.within = -1
			continue
		}
		if j.within < 0 {
			j.within = from
		}
		st.waitWithin += dt
		st.maxWaitWithin = max(st.maxWaitWithin, t-j.within)
	}
}

// snapshot returns the teams as the scheduler sees them now, or nil when
// it does not see them.
func (ts *teams) snapshot() []sched.Team {
	if ts == nil || !ts.show {
		return nil
	}
	ts.sched = ts.sched[:0]
	for i := range ts.t {
		st := &ts.t[i]
		if st.listed {
			ts.sched = append(ts.sched, sched.Team{
				Name: st.Name, GuaranteeGPUs: st.GuaranteeGPUs, Weight: st.Weight,
				UsageGPUSeconds: st.usage, MaxGPUsPerUser: st.MaxGPUsPerUser,
			})
		}
	}
	return ts.sched
}

// TeamResult is how one team did in a run. Times are in seconds.
type TeamResult struct {
	Team           string  `json:"team"`
	GuaranteedGPUs int     `json:"guaranteed_gpus"`
	Weight         float64 `json:"weight"`
	Jobs           int     `json:"jobs"`
	Finished       int     `json:"finished"`
	AvgJCT         float64 `json:"avg_jct_s"`
	AvgPending     float64 `json:"avg_pending_s"`
	// GPUSeconds is what its jobs held, restores included.
	GPUSeconds float64 `json:"gpu_seconds"`
	// BorrowedGPUSeconds is what it held beyond its guarantee: the
	// integral of max(0, held - guarantee) over time.
	BorrowedGPUSeconds float64 `json:"borrowed_gpu_seconds"`
	// Reclaims counts the preemptions made for its jobs to reclaim its
	// guarantee; PreemptedByReclaim those of its jobs that gave borrowed
	// GPUs back.
	Reclaims           int `json:"reclaims"`
	PreemptedByReclaim int `json:"preempted_by_reclaim"`
	// GuaranteeMet is the share of its guarantee the team held while it
	// wanted it: the integral of min(G, held) over that of min(G, held +
	// GPUs its waiting jobs ask for). 1 when it never wanted it.
	GuaranteeMet float64 `json:"guarantee_met"`
	// WaitWithinS sums the time its jobs waited while they fitted within
	// its guarantee (its GPUs held plus theirs at most the guarantee);
	// MaxWaitWithinS is the longest such wait of one job: the bound of
	// docs/fair-share.md, in practice.
	WaitWithinS    float64 `json:"wait_within_guarantee_s"`
	MaxWaitWithinS float64 `json:"max_wait_within_guarantee_s"`
}

// results reports every team: the listed ones in order, then the others.
func (ts *teams) results(jobs []job) []TeamResult {
	out := make([]TeamResult, len(ts.t))
	var sumJCT, sumPending = make([]float64, len(ts.t)), make([]float64, len(ts.t))
	for i := range ts.t {
		st := &ts.t[i]
		w := st.Weight
		if w == 0 {
			w = 1
		}
		out[i] = TeamResult{
			Team: st.Name, GuaranteedGPUs: st.GuaranteeGPUs, Weight: w,
			GPUSeconds: st.gpuSeconds, BorrowedGPUSeconds: st.borrowedGPUSeconds,
			Reclaims: st.reclaims, PreemptedByReclaim: st.reclaimed, GuaranteeMet: 1,
			WaitWithinS: st.waitWithin, MaxWaitWithinS: st.maxWaitWithin,
		}
		if st.owed > 0 {
			out[i].GuaranteeMet = st.got / st.owed
		}
	}
	for i := range jobs {
		j := &jobs[i]
		r := &out[j.team]
		r.Jobs++
		if j.done {
			r.Finished++
			sumJCT[j.team] += j.finish - j.tj.Submit
			sumPending[j.team] += j.finish - j.tj.Submit - j.tj.Duration
		}
	}
	for i := range out {
		if n := out[i].Finished; n > 0 {
			out[i].AvgJCT = sumJCT[i] / float64(n)
			out[i].AvgPending = sumPending[i] / float64(n)
		}
	}
	return out
}

// jain is Jain's fairness index of xs, (sum x)^2 / (n sum x^2): 1 when
// all are equal, 1/n when one has everything; 0 for none.
func jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if len(xs) == 0 || sq == 0 || math.IsInf(sq, 0) {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// jainUsageOverShare is Jain's index, over the teams that guarantee GPUs,
// of the GPU-seconds each used over its guarantee. Over a whole trace in
// which every job finishes, it only reflects the teams' demand.
func jainUsageOverShare(rs []TeamResult) float64 {
	var xs []float64
	for _, r := range rs {
		if r.GuaranteedGPUs > 0 {
			xs = append(xs, r.GPUSeconds/float64(r.GuaranteedGPUs))
		}
	}
	return jain(xs)
}

// jainGuaranteeMet is Jain's index, over the teams that guarantee GPUs,
// of GuaranteeMet: usage over share, each capped by the team's demand.
func jainGuaranteeMet(rs []TeamResult) float64 {
	var xs []float64
	for _, r := range rs {
		if r.GuaranteedGPUs > 0 {
			xs = append(xs, r.GuaranteeMet)
		}
	}
	return jain(xs)
}
