// Package usage computes, in one place, the figures of what jobs consume
// that the portal shows in many (a job's page, the API, the queues, the
// teams, the live stream, /metrics, the CLI): a job's executed time and
// attained service including the run in progress, the GPUs jobs and teams
// hold with a shared GPU counted by the share each of its jobs holds, and
// which jobs borrow GPUs beyond their team's guarantee.
package usage

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Service is what a job has consumed over its runs: the seconds it ran
// and the service it attained, GPUs held x seconds run (GPU-seconds).
type Service struct {
	ExecutedS  float64
	GPUSeconds float64
}

// Accrual is how a run in progress attains service while the GPUs it
// holds change: a shared GPU's share (Shares) changes as jobs join and
// leave it. In its first At seconds the run attained GPUSeconds; since
// then it holds Held GPUs, a shared GPU counted by the job's share of it.
// The zero Accrual holds nothing.
type Accrual struct {
	At, GPUSeconds, Held float64
}

// Whole is the accrual of a run that holds gpus whole GPUs throughout.
func Whole(gpus int) Accrual { return Accrual{Held: float64(max(gpus, 0))} }

// Reheld is a after ran seconds of the run, when the GPUs it holds
// become held: the time since a.At counts at a.Held, and the rest of the
// run at held. A ran before a.At changes only Held.
func (a Accrual) Reheld(ran, held float64) Accrual {
	ran = max(ran, a.At)
	return Accrual{At: ran, GPUSeconds: a.GPUSeconds + (ran-a.At)*a.Held, Held: max(held, 0)}
}

// Ran is s after ran more seconds of a run that accrued as a: ExecutedS
// plus ran, GPUSeconds plus the GPU-seconds a gives the run's first ran
// seconds (a shared GPU counted by the job's share of it, as accounting
// and the GPU counts count it). It is the one place a run is added to a
// job's service: the store, the engine's pass, the simulator's pass and
// the forecaster's replay all add it with Ran.
func (s Service) Ran(ran float64, a Accrual) Service {
	ran = max(ran, 0)
	return Service{ExecutedS: s.ExecutedS + ran, GPUSeconds: s.GPUSeconds + a.GPUSeconds + max(ran-a.At, 0)*a.Held}
}

// Current is a job's service at now: ended, the service of its ended
// runs, plus, while a run is in progress (runningSince not nil), that
// run's as a accrues it. A run that starts after now adds nothing.
func Current(ended Service, a Accrual, runningSince *time.Time, now time.Time) Service {
	if runningSince == nil {
		return ended
	}
	ran := now.Sub(*runningSince).Seconds()
	if ran <= 0 {
		return ended
	}
	return ended.Ran(ran, a)
}

// Run is a running job as the GPU count sees it.
type Run struct {
	Job  int64
	Team string
	// GPUs names the GPUs it runs on ("node:index"), each once.
	GPUs []string
	// Sharing: the job may share its GPU (Salus); Fraction, in (0, 1),
	// is the share of a GPU it asked for, 0 when it asked for none.
	Sharing  bool
	Fraction float64
	// Since is when the run began: a team's earlier runs fill its
	// guarantee first.
	Since time.Time
	// Beyond: the scheduler counted the job beyond its team's guarantee
	// (sched.Decisions.Borrowed), so it comes after the team's others.
	Beyond bool
}

// Figures are the GPUs held by running jobs and teams at one moment.
// The zero value holds nothing.
type Figures struct {
	held     map[int64]float64
	onGPU    map[string][]Holding
	team     map[int64]string
	borrowed map[int64]bool
	teams    map[string]Standing
	inUse    float64
}

// Standing is where a team stands: the GPUs its running jobs hold, its
// guarantee, and how far beyond it the team runs.
type Standing struct {
	InUseGPUs     float64
	GuaranteeGPUs int
	// BorrowedGPUs is max(0, InUseGPUs - GuaranteeGPUs).
	BorrowedGPUs float64
}

// eps absorbs the rounding of sums of fractions (three thirds).
const eps = 1e-9

// round drops what the sums of fractions add beyond the ninth decimal,
// so that seven sevenths of a GPU are one GPU, not 1.0000000000000002.
func round(x float64) float64 { return math.Round(x*1e9) / 1e9 }

// Claim is how a running job holds one GPU it runs on: Sharing, the job
// may share it (Salus); Fraction, in (0, 1), the share of a GPU it asked
// for, 0 when it asked for none.
type Claim struct {
	Sharing  bool
	Fraction float64
}

// Shares appends to dst[:0] the share of one GPU that each of the jobs
// on it holds, claims[k] being the k-th job's claim, and returns it. A
// job that does not share holds the whole GPU, a sharing job that asked
// for fraction f holds f, and one that did not holds 1/n of it, n the
// jobs on the GPU; where these add up to more than one GPU, each is
// scaled down so that they add up to one. It is the one rule by which
// the portal (Of) and the scheduler (core/sched) count shared GPUs.
func Shares(dst []float64, claims []Claim) []float64 {
	dst = dst[:0]
	sum := 0.0
	for _, c := range claims {
		s := 1 / float64(len(claims))
		switch {
		case !c.Sharing:
			s = 1
		case c.Fraction > 0 && c.Fraction < 1:
			s = c.Fraction
		}
		dst = append(dst, s)
		sum += s
	}
	if sum > 1 {
		for k := range dst {
			dst[k] /= sum
		}
	}
	return dst
}

// Of computes the figures of runs, with each team's guaranteed GPUs
// (a team not in guarantees has none).
//
// On each GPU, the jobs on it hold the shares that Shares gives them.
// So the GPUs held never exceed the GPUs the jobs run on.
//
// A team's runs fill its guarantee in order (those the scheduler counts
// within it first, then the earliest started); a job borrows when the
// GPUs held so far, its own included, pass the guarantee. So a job
// borrows only when its team is over its guarantee.
func Of(runs []Run, guarantees map[string]int) Figures {
	f := Figures{held: make(map[int64]float64, len(runs)), borrowed: make(map[int64]bool),
		teams: make(map[string]Standing), onGPU: make(map[string][]Holding), team: make(map[int64]string, len(runs))}
	onGPU := make(map[string][]int) // GPU -> indices into runs
	for i, r := range runs {
		for _, g := range r.GPUs {
			onGPU[g] = append(onGPU[g], i)
		}
	}
	var claims []Claim
	var shares []float64
	for g, idx := range onGPU {
		claims = claims[:0]
		for _, i := range idx {
			claims = append(claims, Claim{Sharing: runs[i].Sharing, Fraction: runs[i].Fraction})
		}
		shares = Shares(shares, claims)
		for k, i := range idx {
			f.held[runs[i].Job] += shares[k]
			f.onGPU[g] = append(f.onGPU[g], Holding{Job: runs[i].Job, Share: shares[k]})
			f.team[runs[i].Job] = runs[i].Team
		}
		slices.SortFunc(f.onGPU[g], func(a, b Holding) int { return cmp.Compare(a.Job, b.Job) })
	}
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ra, rb := &runs[a], &runs[b]
		if c := cmp.Compare(ra.Team, rb.Team); c != 0 {
			return c
		}
		if ra.Beyond != rb.Beyond {
			if rb.Beyond {
				return -1
			}
			return 1
		}
		if c := ra.Since.Compare(rb.Since); c != 0 {
			return c
		}
		return cmp.Compare(ra.Job, rb.Job)
	})
	for _, i := range order {
		r := &runs[i]
		t := f.teams[r.Team]
		t.GuaranteeGPUs = guarantees[r.Team]
		t.InUseGPUs += f.held[r.Job]
		if t.InUseGPUs > float64(t.GuaranteeGPUs)+eps {
			f.borrowed[r.Job] = true
		}
		f.teams[r.Team] = t
		f.inUse += f.held[r.Job]
	}
	for name, t := range f.teams {
		t.InUseGPUs = round(t.InUseGPUs)
		if t.InUseGPUs > float64(t.GuaranteeGPUs)+eps {
			t.BorrowedGPUs = round(t.InUseGPUs - float64(t.GuaranteeGPUs))
		}
		f.teams[name] = t
	}
	f.inUse = round(f.inUse)
	for name, g := range guarantees {
		if _, ok := f.teams[name]; !ok {
			f.teams[name] = Standing{GuaranteeGPUs: g}
		}
	}
	return f
}

// Held is the GPUs job id holds; 0 when it does not run.
func (f Figures) Held(id int64) float64 { return f.held[id] }

// Borrowed reports whether job id runs beyond its team's guarantee.
func (f Figures) Borrowed(id int64) bool { return f.borrowed[id] }

// Team is where team stands; a team with no running job and no
// guarantee given to Of holds nothing.
func (f Figures) Team(team string) Standing { return f.teams[team] }

// InUseGPUs is the GPUs all running jobs hold.
func (f Figures) InUseGPUs() float64 { return f.inUse }

// Holding is a job's share of one GPU.
type Holding struct {
	Job   int64
	Share float64
}

// OnGPU lists the running jobs placed on gpu ("node:index"), in job
// order, each with the share of the GPU it holds (as Of counts them);
// nil when none: the GPU is not allocated.
func (f Figures) OnGPU(gpu string) []Holding { return f.onGPU[gpu] }

// Utilized is, per team, the GPUs its running jobs keep busy: on each GPU
// they run on, the GPU's utilization (util, from 0 to 1; a GPU it knows
// nothing of counts 0) times the share of the GPU they hold. So a team's
// utilized GPUs never exceed the GPUs it holds (Standing.InUseGPUs), and
// a team with jobs on idle GPUs utilizes 0.
func (f Figures) Utilized(util func(gpu string) float64) map[string]float64 {
	out := make(map[string]float64, len(f.teams))
	for g, hs := range f.onGPU {
		u := min(max(util(g), 0), 1)
		for _, h := range hs {
			out[f.team[h.Job]] += u * h.Share
		}
	}
	for t, v := range out {
		out[t] = round(v)
	}
	return out
}
