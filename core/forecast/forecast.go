// Package forecast predicts when waiting jobs will start, by running the
// scheduling core forward from a snapshot of the cluster on a virtual
// clock.
//
// The method: every job is given a run time drawn from the run times of
// finished jobs (History), conditioned on how long it has already run, so
// that a job that has run long is expected to run longer; before 3 jobs
// have finished, where every job declared a time limit, from its limit
// alone (limitRemaining). The scheduler
// then runs pass after pass, as the simulator does, with jobs finishing
// when their run time is up, until every waiting job has started (or the
// forecast's budget is spent). This is done Config.Samples times, each
// time with every job's run time drawn afresh and independently of the
// others (a job waiting for a whole machine waits for the longest of the
// jobs there, which no single quantile of the run times describes). A
// job's forecast is the range of its sampled starts (the 10th to the
// 90th percentile by default), and their median. The draws come from a
// fixed seed, so the same input gives the same forecast.
//
// Jobs yet to be submitted matter too: a small job that arrives later may
// take GPUs a large waiting job waits for (skip-ahead), and a preemptive
// policy ranks new jobs first. When the input says what arrivals to
// expect (Input.Arrivals: a rate, and jobs like the recent ones), each
// sample also draws arrivals, a Poisson process of jobs like those. The
// portal measures how good the forecasts have been (calibration).
//
// Jobs that cannot start at all get no range but a reason, from the
// scheduler's own wait causes: a request larger than every schedulable
// GPU (sched.WaitTooLarge), a user whose cap is smaller than the job
// (sched.WaitUserCap), an invalid request; and any job still waiting when
// the forecast runs out of events (every other job done, nothing left to
// relax or reclaim).
//
// The package is pure: snapshot, history and configuration in, forecasts
// out; no clock, no I/O, no goroutines. The same input always gives the
// same forecasts.
package forecast

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// Defaults applied to zero Config fields.
var (
	// DefaultRange are the quantiles of the sampled starts that bound a
	// forecast's range.
	DefaultRange = [2]float64{0.1, 0.9}
)

const (
	// DefaultSamples is how many times a forecast runs the cluster
	// forward.
	DefaultSamples = 10
	// DefaultSeed seeds the draws of run times.
	DefaultSeed = 0x9e3779b97f4a7c15
	// DefaultDrift is Config.Drift's default, measured on trace replays
	// (docs/forecast.md): without it, ranges of long queues are too
	// narrow to hold the starts they forecast.
	DefaultDrift = 0.3
	// DefaultMaxLoad is Config.MaxLoad's default: no more arrivals than
	// the cluster serves.
	DefaultMaxLoad = 1.0
	// DefaultBudget bounds a forecast's work: the jobs the scheduler
	// looks at, summed over its passes and samples (so 400 passes per
	// sample over 1,000 jobs, or 40 over 10,000).
	DefaultBudget = 4_000_000
	// DefaultHorizonS is how far ahead a forecast looks: 7 days.
	DefaultHorizonS = 7 * 24 * 3600.0
	// DefaultStepS and DefaultStepFrac set how finely events are told
	// apart: events less than max(StepS, StepFrac x the time since the
	// forecast began) after the next one are handled in one pass with it.
	DefaultStepS    = 1.0
	DefaultStepFrac = 0.01
	// DefaultWindow is Config.Window's default.
	DefaultWindow = 500
)

// Config sets up a Forecaster.
type Config struct {
	// Sched is the configuration of the scheduler whose decisions are
	// forecast: the live one.
	Sched sched.Config
	// Samples is how many times the cluster is run forward, with run
	// times drawn afresh each time; 0 means DefaultSamples.
	Samples int
	// Range are the quantiles of a job's sampled starts that bound its
	// forecast, Earliest and Latest; the zero value means DefaultRange.
	Range [2]float64
	// Seed seeds the draws; 0 means DefaultSeed.
	Seed uint64
	// Drift is how far the run times of the jobs to come may stray from
	// those of the history, as the log-normal sigma of a factor that
	// scales all of one sample's run times (the samples take its
	// quantiles in turn); 0 means DefaultDrift, negative none.
	Drift float64
	// Budget bounds a forecast's work (see DefaultBudget), shared evenly
	// by the samples; a job not started within it is forecast to start
	// later than the samples reached (StateLater).
	Budget int
	// HorizonS bounds how far ahead a forecast looks, in seconds.
	HorizonS float64
	// StepS and StepFrac: see DefaultStepS.
	StepS, StepFrac float64
	// Window is how many waiting jobs a scenario's pass sees at most,
	// besides the running ones: the first of the first pass's priority
	// order, the next joining as those start (jobs that arrive join at
	// once). A pass costs what it looks at, and a long queue needs a
	// pass for every few starts: without a window, forecasting every job
	// of a queue of n costs n x n. A job behind the window could only
	// start sooner by skipping ahead of all of them. It is at least twice
	// the schedulable GPUs; 0 means DefaultWindow.
	Window int
	// MinHistory is how many finished jobs the history needs for any
	// forecast; 0 means DefaultMinHistory.
	MinHistory int
	// HalfLifeS is the half-life of team usage under fair share, as the
	// live engine decays it; 0 or less means no decay.
	HalfLifeS float64
	// MaxLoad bounds the expected arrivals (Input.Arrivals): never more
	// GPU-seconds a second than this share of the cluster's GPUs, the
	// work of an arrival taken as its GPUs times the mean run time. A
	// submission rate beyond what the cluster serves does not last (its
	// queue would grow without end; people wait for their results before
	// they submit more), and forecasting it would starve large jobs
	// forever. 0 means DefaultMaxLoad.
	MaxLoad float64
	// KnownRunTimes is a diagnostic (sim --forecast-oracle runtimes):
	// every job with a known run time (sched.Job.DurationS, which only a
	// trace replay knows) runs exactly that long in every sample, no
	// drift, expected arrivals that of the job each is drawn like. What
	// error is left is the arrivals' and the forecast's own.
	KnownRunTimes bool
}

// State says what kind of forecast a job has.
type State string

// The forecast states.
const (
	// StateExpected: the job starts between Earliest and Latest (Latest
	// zero: no later bound was reached), most likely at Likely (zero:
	// not reached in the middle scenario).
	StateExpected State = "expected"
	// StateLater: the job did not start within the forecast's reach; it
	// starts after Earliest, if at all.
	StateLater State = "later"
	// StateNever: the job cannot start while the cluster, its team and
	// its user are as they are; Reason says why.
	StateNever State = "never"
	// StateUnknown: too few jobs have finished to know run times.
	StateUnknown State = "unknown"
)

// Forecast is one waiting job's forecast. Times are seconds on the
// snapshot's clock.
type Forecast struct {
	JobID                    int64
	State                    State
	Earliest, Likely, Latest float64
	// Reason says why for StateNever, StateLater and StateUnknown.
	Reason string
	// Cause is the scheduler's wait cause behind a StateNever, or empty.
	Cause sched.WaitCause
}

// Result is a whole forecast.
type Result struct {
	// Now is the snapshot's time: when the forecast was made.
	Now float64
	// Jobs holds one forecast per waiting job (pending in the snapshot,
	// or arriving later), by job ID.
	Jobs []Forecast
	// Samples is how many times the cluster was run forward.
	Samples int
	// Passes is the scheduling passes run over all scenarios, and Visits
	// the jobs they looked at in all: the forecast's cost.
	Passes, Visits int
	// Truncated tells whether some scenario stopped at the budget or the
	// horizon with jobs still waiting.
	Truncated bool
	// History says what run times the forecast learned from.
	History string
	// ArrivalsPerS is the rate of the arrivals the forecast expected: the
	// input's, bounded by Config.MaxLoad; 0 when none.
	ArrivalsPerS float64
}

// Job returns the forecast of job id.
func (r Result) Job(id int64) (Forecast, bool) {
	i, ok := slices.BinarySearchFunc(r.Jobs, id, func(f Forecast, id int64) int {
		switch {
		case f.JobID < id:
			return -1
		case f.JobID > id:
			return 1
		}
		return 0
	})
	if !ok {
		return Forecast{}, false
	}
	return r.Jobs[i], true
}

// Arrival is a job that joins the queue at At: one waiting out a retry
// backoff, for example.
type Arrival struct {
	Job sched.Job
	At  float64
}

// Arrivals describes the jobs expected to be submitted: RatePerS of them
// per second on average, at independent times, each like one of Like
// (drawn at random): its GPUs, team, user, model and sharing. No job
// arrives while twice as many jobs wait as waited at the forecast (20 at
// least): people stop submitting to a queue that long.
type Arrivals struct {
	RatePerS float64
	Like     []sched.Job
}

// Input is what one forecast starts from.
type Input struct {
	// Snapshot is the cluster now, as the live pass saw it.
	Snapshot sched.Snapshot
	// Later are jobs that join the queue after Snapshot.Now.
	Later []Arrival
	// Arrivals, when set, are the jobs expected to be submitted from now
	// on; they compete with the waiting jobs but get no forecast.
	Arrivals *Arrivals
	// History is what run times are drawn from.
	History *History
	// Leaving says when each leaving job of the snapshot (sched.Leaving:
	// asked to stop, saving its work) is expected to have exited, in the
	// snapshot's seconds: it holds its GPUs until then, and waits again
	// from then. One not named, or named at or before Now, leaves now.
	Leaving map[int64]float64
	// Ending names the leaving jobs that end once out (cancelled, past
	// their time limit, failed): they hold their GPUs until then, as
	// Leaving says, and do not wait again.
	Ending map[int64]bool
	// HandoverS is how long a job the scenarios preempt is expected to
	// hold its GPUs before it exits (its checkpoint), in seconds: the job
	// that preempted it starts on them once it has (sched.HandOver and
	// Promises, as the engine starts it). 0: at once.
	HandoverS float64
}

// Forecaster makes forecasts under one configuration. It keeps
// schedulers to reuse between forecasts and is safe for concurrent use.
type Forecaster struct {
	cfg   Config
	waits *sched.Scheduler // explains: the first pass
	fast  *sched.Scheduler // omits explanations: every later pass
}

// New checks cfg and returns a Forecaster.
func New(cfg Config) (*Forecaster, error) {
	if cfg.Samples < 0 {
		return nil, fmt.Errorf("forecast: samples %d: want 0 (the default) or more", cfg.Samples)
	}
	if cfg.Samples == 0 {
		cfg.Samples = DefaultSamples
	}
	if cfg.Range == [2]float64{} {
		cfg.Range = DefaultRange
	}
	if lo, hi := cfg.Range[0], cfg.Range[1]; !(lo >= 0 && lo <= hi && hi <= 1) {
		return nil, fmt.Errorf("forecast: range %v: want two quantiles, 0 <= low <= high <= 1", cfg.Range)
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	switch d := cfg.Drift; {
	case math.IsNaN(d) || math.IsInf(d, 0):
		return nil, fmt.Errorf("forecast: drift %v: want a finite number", d)
	case d == 0:
		cfg.Drift = DefaultDrift
	case d < 0:
		cfg.Drift = 0
	}
	if cfg.Budget < 0 {
		return nil, fmt.Errorf("forecast: budget %d: want 0 (the default) or more", cfg.Budget)
	}
	if cfg.Budget == 0 {
		cfg.Budget = DefaultBudget
	}
	for _, v := range []struct {
		name string
		p    *float64
		def  float64
	}{{"horizon", &cfg.HorizonS, DefaultHorizonS}, {"step", &cfg.StepS, DefaultStepS}, {"step fraction", &cfg.StepFrac, DefaultStepFrac}} {
		if math.IsNaN(*v.p) || math.IsInf(*v.p, 0) || *v.p < 0 {
			return nil, fmt.Errorf("forecast: %s %v: want a finite number, 0 (the default) or more", v.name, *v.p)
		}
		if *v.p == 0 {
			*v.p = v.def
		}
	}
	if cfg.Window < 0 {
		return nil, fmt.Errorf("forecast: window %d: want 0 (the default) or more", cfg.Window)
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MinHistory <= 0 {
		cfg.MinHistory = DefaultMinHistory
	}
	if cfg.MaxLoad == 0 {
		cfg.MaxLoad = DefaultMaxLoad
	}
	if err := CheckMaxLoad(cfg.MaxLoad); err != nil {
		return nil, fmt.Errorf("forecast: %w", err)
	}
	sc := cfg.Sched
	sc.OmitWaits = false
	waits, err := sched.New(sc)
	if err != nil {
		return nil, fmt.Errorf("forecast: %w", err)
	}
	sc.OmitWaits = true
	fast, err := sched.New(sc)
	if err != nil {
		return nil, fmt.Errorf("forecast: %w", err)
	}
	return &Forecaster{cfg: cfg, waits: waits, fast: fast}, nil
}

// Config returns the configuration with defaults filled in.
func (f *Forecaster) Config() Config { return f.cfg }

// Forecast forecasts the start of every waiting job of in.
func (f *Forecaster) Forecast(in Input) Result {
	s := in.Snapshot
	res := Result{Now: s.Now, Samples: f.cfg.Samples, History: in.History.Describe()}
	var targets []int64
	for i := range s.Jobs {
		if s.Jobs[i].State == sched.Pending {
			targets = append(targets, s.Jobs[i].ID)
		}
	}
	for _, a := range in.Later {
		targets = append(targets, a.Job.ID)
	}
	slices.Sort(targets)
	targets = slices.Compact(targets)
	if len(targets) == 0 {
		return res
	}
	// The first pass is the live pass: explained once, applied in every
	// scenario.
	first := f.waits.Schedule(s)
	res.Passes, res.Visits = 1, len(s.Jobs)
	nv := nevers(&s, first.Waits)
	startsNow := make(map[int64]bool, len(first.Starts))
	held := handedOver(&s, first, in.HandoverS)
	for _, st := range first.Starts {
		// One on GPUs a leaving job or this pass's victim holds starts
		// once they are out: the scenarios say when.
		if !slices.ContainsFunc(st.GPUs, func(g gpu.Ref) bool { return held[g] }) {
			startsNow[st.JobID] = true
		}
	}
	// The jobs the live pass preempts wait after it: they are forecast
	// too (else a job preempted after the forecast's snapshot would have
	// none until the next).
	if len(first.Preempts) > 0 {
		for _, p := range first.Preempts {
			targets = append(targets, p.JobID)
		}
		slices.Sort(targets)
		targets = slices.Compact(targets)
	}

	known := in.History.Len() >= f.cfg.MinHistory
	// Before enough jobs have finished, a cluster whose every job
	// declared a time limit is still forecast: from the limits alone
	// (limitsOnly), without expected arrivals, whose work is not known.
	byLimits := !known && allLimited(&s, in.Later)
	if byLimits {
		res.History = "the time limits alone (" + in.History.Describe() + ")"
	}
	order := waitOrder(&s, first, nv)
	window := max(f.cfg.Window, 2*schedulableGPUs(&s))
	var runs []scenarioResult
	arrivals := in.Arrivals != nil && in.Arrivals.RatePerS > 0 && len(in.Arrivals.Like) > 0
	if arrivals && known {
		a := *in.Arrivals
		a.RatePerS = min(a.RatePerS, f.maxRate(&s, &a, in.History))
		in.Arrivals, res.ArrivalsPerS = &a, a.RatePerS
		arrivals = a.RatePerS > 0
	}
	arrivals = arrivals && known
	if known || byLimits {
		for k := range f.cfg.Samples {
			r := f.scenario(in, first, order, window, uint64(k), arrivals, s.Now+f.cfg.HorizonS)
			res.Passes += r.passes
			res.Visits += r.visits
			res.Truncated = res.Truncated || (r.truncated && len(r.starts) < len(targets))
			runs = append(runs, r)
		}
		// With arrivals, a sample never runs out of events: whether a job
		// that started in none can start at all is asked of one more
		// sample, without arrivals, which ends when nothing is left to
		// happen.
		if arrivals && notStarted(targets, runs, nv, startsNow) {
			r := f.scenario(in, first, order, window, 0, false, s.Now+f.cfg.HorizonS)
			res.Passes += r.passes
			res.Visits += r.visits
			if r.quiet {
				for id, c := range r.causes {
					if _, ok := nv[id]; !ok && !startedIn(id, runs) {
						nv[id] = never{cause: c, reason: "cannot start with the cluster as it is, even once every other job has finished: " + r.reasons[id]}
					}
				}
			}
		}
	}
	for _, id := range targets {
		fc := Forecast{JobID: id}
		switch n, ok := nv[id]; {
		case ok:
			fc.State, fc.Reason, fc.Cause = StateNever, n.reason, n.cause
		case startsNow[id]:
			fc.State, fc.Earliest, fc.Likely, fc.Latest = StateExpected, s.Now, s.Now, s.Now
		case !known && !byLimits:
			fc.State = StateUnknown
			fc.Reason = "run times are not known yet: " + strconv.Itoa(in.History.Len()) + " of the " +
				strconv.Itoa(f.cfg.MinHistory) + " finished jobs a forecast needs"
		default:
			fc = combine(id, runs, f.cfg.Range)
		}
		res.Jobs = append(res.Jobs, fc)
	}
	return res
}

// CheckMaxLoad says why m is no bound on the expected arrivals
// (Config.MaxLoad, where 0 stands for DefaultMaxLoad): it must be a
// finite share of the cluster's GPUs above 0. The flags that set it
// (serve and sim --forecast-max-load) name themselves before the error.
func CheckMaxLoad(m float64) error {
	if math.IsNaN(m) || math.IsInf(m, 0) || m <= 0 {
		return fmt.Errorf("max load %v: want a share of the cluster's GPUs above 0, such as %v (the default: arrivals at most what the cluster serves) or 2", m, DefaultMaxLoad)
	}
	return nil
}

// maxRate is the arrival rate at which jobs like a's would load the
// schedulable GPUs of s to Config.MaxLoad.
func (f *Forecaster) maxRate(s *sched.Snapshot, a *Arrivals, h *History) float64 {
	gpus := schedulableGPUs(s)
	perJob := 0.0
	for _, j := range a.Like {
		perJob += float64(max(j.GPUs, 1))
	}
	work := perJob / float64(len(a.Like)) * h.Mean()
	if !(work > 0) {
		return 0
	}
	return f.cfg.MaxLoad * float64(gpus) / work
}

// schedulableGPUs counts the GPUs of s that jobs may start on.
func schedulableGPUs(s *sched.Snapshot) int {
	gpus := 0
	for _, n := range s.Nodes {
		if !n.Unschedulable {
			gpus += len(n.GPUs)
		}
	}
	return gpus
}

// waitOrder is the waiting jobs of s that the first pass leaves waiting,
// as indexes of s.Jobs, in that pass's priority order (its Waits); any
// it did not explain follow, in the snapshot's order, and last those
// that can never start (nv), which would keep the window's places.
func waitOrder(s *sched.Snapshot, first sched.Decisions, nv map[int64]never) []int {
	at := make(map[int64]int)
	for i := range s.Jobs {
		if s.Jobs[i].State == sched.Pending {
			at[s.Jobs[i].ID] = i
		}
	}
	for _, st := range first.Starts {
		delete(at, st.JobID)
	}
	out := make([]int, 0, len(at))
	for _, w := range first.Waits {
		if i, ok := at[w.JobID]; ok {
			out = append(out, i)
			delete(at, w.JobID)
		}
	}
	rest := make([]int, 0, len(at))
	for _, i := range at {
		rest = append(rest, i)
	}
	slices.Sort(rest)
	out = append(out, rest...)
	if len(nv) > 0 {
		slices.SortStableFunc(out, func(a, b int) int {
			_, na := nv[s.Jobs[a].ID]
			_, nb := nv[s.Jobs[b].ID]
			switch {
			case na == nb:
				return 0
			case nb:
				return -1
			}
			return 1
		})
	}
	return out
}

// notStarted tells whether some target that is not known never to start
// and does not start now started in no sample.
func notStarted(targets []int64, runs []scenarioResult, nv map[int64]never, now map[int64]bool) bool {
	for _, id := range targets {
		if _, ok := nv[id]; !ok && !now[id] && !startedIn(id, runs) {
			return true
		}
	}
	return false
}

func startedIn(id int64, runs []scenarioResult) bool {
	for _, r := range runs {
		if _, ok := r.starts[id]; ok {
			return true
		}
	}
	return false
}

// combine makes job id's forecast from its start in each sample: the
// range's quantiles of the starts (predictive), a sample that did not
// start the job counting as a start after every other.
func combine(id int64, runs []scenarioResult, rng [2]float64) Forecast {
	fc := Forecast{JobID: id}
	starts := make([]float64, len(runs))
	started := 0
	for i, r := range runs {
		at, ok := r.starts[id]
		if !ok {
			at = math.Inf(1)
		} else {
			started++
		}
		starts[i] = at
	}
	slices.Sort(starts)
	if started > 0 {
		if lo := predictive(starts, rng[0]); !math.IsInf(lo, 1) && !math.IsNaN(lo) {
			fc.State, fc.Earliest = StateExpected, lo
			if m := quantile(starts, 0.5); !math.IsInf(m, 1) && !math.IsNaN(m) {
				fc.Likely = m
			}
			if hi := predictive(starts, rng[1]); !math.IsInf(hi, 1) && !math.IsNaN(hi) {
				fc.Latest = hi
			}
			return fc
		}
	}
	for _, r := range runs {
		if r.quiet && math.IsInf(starts[0], 1) {
			fc.State, fc.Cause = StateNever, r.causes[id]
			fc.Reason = "cannot start with the cluster as it is, even once every other job has finished"
			if w := r.reasons[id]; w != "" {
				fc.Reason += ": " + w
			}
			return fc
		}
	}
	// Started in too few samples within their reach: not before the
	// earliest point a sample reached without starting it.
	fc.State = StateLater
	fc.Earliest = math.Inf(1)
	for _, r := range runs {
		if at, ok := r.starts[id]; ok {
			fc.Earliest = min(fc.Earliest, at)
		} else {
			fc.Earliest = min(fc.Earliest, r.reached)
		}
	}
	fc.Reason = "not started within the forecast's reach"
	return fc
}

// predictive is the q-quantile of the next draw from the distribution
// that sorted (increasing, +Inf allowed) was drawn from: the order
// statistic at q(n+1), interpolated and held within the samples. The k-th
// of n draws falls below the next with probability k/(n+1), so the range
// between the q- and (1-q)-quantiles holds about 1-2q of the starts
// whatever n is; the plain quantiles of the samples (order statistic
// q(n-1)+1) hold fewer, 65% for the 10th to 90th of 10 samples.
func predictive(sorted []float64, q float64) float64 {
	n := len(sorted)
	pos := min(max(q*float64(n+1)-1, 0), float64(n-1))
	lo := int(math.Floor(pos))
	f := pos - float64(lo)
	if f == 0 || lo+1 >= n {
		return sorted[lo]
	}
	if math.IsInf(sorted[lo+1], 1) {
		return sorted[lo+1]
	}
	return sorted[lo]*(1-f) + sorted[lo+1]*f
}

// never is why a job can never start.
type never struct {
	cause  sched.WaitCause
	reason string
}

// nevers finds, among the first pass's waits, the jobs that cannot start
// while the cluster, the teams and the users' caps are as they are.
func nevers(s *sched.Snapshot, waits []sched.Wait) map[int64]never {
	out := make(map[int64]never)
	var byID map[int64]*sched.Job
	for _, w := range waits {
		switch w.Cause {
		case sched.WaitInvalid, sched.WaitTooLarge:
			out[w.JobID] = never{cause: w.Cause, reason: "cannot start: " + w.Reason}
		case sched.WaitUserCap:
			if byID == nil {
				byID = make(map[int64]*sched.Job, len(s.Jobs))
				for i := range s.Jobs {
					byID[s.Jobs[i].ID] = &s.Jobs[i]
				}
			}
			j := byID[w.JobID]
			if j == nil {
				continue
			}
			if c := userCap(s.Teams, j.Team, j.User); c > 0 && j.GPUs > c {
				out[w.JobID] = never{cause: w.Cause, reason: "cannot start while the cap of user " + j.User + " in team " + j.Team +
					" is " + plural(c, "GPU") + ": it needs " + strconv.Itoa(j.GPUs)}
			}
		}
	}
	return out
}

// userCap is the GPUs user may hold in team; 0 is no cap.
func userCap(teams []sched.Team, team, user string) int {
	for _, t := range teams {
		if t.Name == team {
			return t.CapOf(user)
		}
	}
	return 0
}

// handedOver are the GPUs that the leaving jobs of s and the jobs the
// first pass preempts hold, with a handover; nil without one.
func handedOver(s *sched.Snapshot, first sched.Decisions, handoverS float64) map[gpu.Ref]bool {
	if !(handoverS > 0) {
		return nil
	}
	victim := make(map[int64]bool, len(first.Preempts))
	for _, p := range first.Preempts {
		victim[p.JobID] = true
	}
	var held map[gpu.Ref]bool
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.State != sched.Leaving && !victim[j.ID] {
			continue
		}
		for _, g := range j.Placement {
			if held == nil {
				held = make(map[gpu.Ref]bool)
			}
			held[g] = true
		}
	}
	return held
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// scenarioResult is what one scenario found.
type scenarioResult struct {
	starts  map[int64]float64 // first start of each job that started
	reached float64           // the virtual time it reached
	quiet   bool              // it ran out of events: no job is left to finish
	// causes and reasons explain, when quiet, why each job still waits.
	causes    map[int64]sched.WaitCause
	reasons   map[int64]string
	passes    int
	visits    int
	truncated bool
}

// simJob is a scenario's record of one job, index for index with the
// scenario's snapshot.
type simJob struct {
	dur      float64 // its total run time in this scenario
	run      int     // runs so far; a completion names the run it ends
	runStart float64
	execAt   float64 // ExecutedS and AttainedService at runStart
	servAt   float64
	done     bool
	team     int  // index in the scenario's teams, or -1
	target   bool // a job waiting at the forecast, or one of Input.Later: its start is forecast
}

// scenario runs the scheduler forward with every job's remaining run
// time drawn from its distribution (sample k of the forecast), starting
// from the first pass's decisions. order is the jobs the first pass
// leaves waiting, in its order (waitOrder): the passes see the first
// window of them, and the next as those start (Config.Window).
func (f *Forecaster) scenario(in Input, first sched.Decisions, order []int, window int, k uint64, arrivals bool, horizon float64) scenarioResult {
	s := &scen{f: f, k: k, h: in.History, limitsOnly: in.History.Len() < f.cfg.MinHistory, budget: f.cfg.Budget / f.cfg.Samples, nextArr: math.Inf(1),
		scale: math.Exp(f.cfg.Drift * normalQuantile((float64(k)+0.5)/float64(f.cfg.Samples))), now: in.Snapshot.Now, start: in.Snapshot.Now,
		nodes: in.Snapshot.Nodes, dist: in.Snapshot.GPUTimeDist, handover: max(in.HandoverS, 0), ending: in.Ending,
		res: scenarioResult{starts: make(map[int64]float64)}}
	s.teams = slices.Clone(in.Snapshot.Teams)
	s.teamIdx = make(map[string]int, len(s.teams))
	for i, t := range s.teams {
		s.teamIdx[t.Name] = i
	}
	s.later = slices.Clone(in.Later)
	slices.SortStableFunc(s.later, func(a, b Arrival) int { return cmpFloat(a.At, b.At) })
	s.snap, s.window = in.Snapshot.Jobs, window
	s.backlog = order[min(window, len(order)):]
	behind := make([]bool, len(s.snap))
	for _, i := range s.backlog {
		behind[i] = true
	}
	n := len(s.snap) - len(s.backlog) + len(in.Later)
	s.jobs = make([]sched.Job, 0, n)
	s.meta = make([]simJob, 0, n)
	s.index = make(map[int64]int, n)
	preempted := make(map[int64]bool, len(first.Preempts))
	for _, p := range first.Preempts {
		preempted[p.JobID] = true
	}
	left := false // a leaving job left: the pass its exit makes is due now
	for i, j := range s.snap {
		if behind[i] {
			continue
		}
		if j.State == sched.Leaving {
			// Asked to stop: it waits again once it has exited, within
			// its grace period. Shown without the GPUs promised to
			// another job (the engine gives them back; the simulator's
			// replay does not), it may ask for none: left out.
			if j.GPUs <= 0 {
				continue
			}
			if at := in.Leaving[j.ID]; at > s.now {
				s.addLeaving(j, at)
				continue
			}
			if in.Ending[j.ID] {
				left = true // out now, for good
				continue
			}
			j.State, j.Placement, j.HeldGPUs = sched.Pending, nil, 0
			left = true
		}
		s.add(j, j.State == sched.Pending || preempted[j.ID])
	}
	s.waiting = len(in.Later) + len(s.backlog)
	for i := range s.jobs {
		if s.meta[i].target {
			s.waiting++
		}
	}
	if arrivals {
		s.arr = in.Arrivals
		s.maxQueue = max(20, 2*s.pending())
		s.nextArr = s.now + s.gap()
		if s.nextArr > horizon {
			s.nextArr = math.Inf(1)
		}
	}
	s.apply(first)
	if left && (s.recheck == 0 || s.recheck > s.now) {
		s.recheck = s.now
	}
	s.res.passes, s.res.visits = 0, 0 // the first pass is counted once, by Forecast
	s.run()
	s.res.reached = s.now
	return s.res
}

// scen is one scenario's state.
type scen struct {
	f      *Forecaster
	k      uint64  // the sample
	scale  float64 // every run time of the sample is scaled by it
	budget int
	h      *History
	now    float64
	start  float64
	nodes  []sched.Node
	dist   *sched.GPUTimeDist
	// handover is Input.HandoverS; promised are the starts it keeps back.
	handover float64
	promised sched.Promises
	// ending is Input.Ending.
	ending map[int64]bool

	jobs  []sched.Job // unfinished jobs, the scheduler's view
	meta  []simJob    // index for index with jobs
	index map[int64]int
	dirty bool // some job finished: jobs needs compacting

	// snap is the snapshot's jobs; backlog those of them, by index, that
	// wait behind the window, in the first pass's order; window is how
	// many waiting jobs jobs holds before the next of them joins.
	// queueAt holds the first pass's queue changes of jobs behind it;
	// expected the arrivals expected that came while it was full, which
	// join it after backlog.
	snap     []sched.Job
	backlog  []int
	window   int
	queueAt  map[int64]sched.QueueState
	expected []sched.Job

	teams   []sched.Team
	teamIdx map[string]int

	later    []Arrival // jobs still to arrive, by time
	arr      *Arrivals // expected arrivals, nil when none are drawn
	nextArr  float64   // when the next expected arrival comes; +Inf: none
	drawn    uint64    // expected arrivals drawn so far
	maxQueue int       // no expected arrival while this many jobs wait
	ends     ends
	recheck  float64
	// rsv are the last pass's reservations, handed back to the next
	// (sched.Snapshot.Reservations), as the engine and the simulator do.
	rsv     []sched.Reservation
	waiting int // targets not yet started
	res     scenarioResult
	// limitsOnly: too few jobs have finished for their run times to
	// say; every job declared a limit (allLimited), and its run time is
	// drawn from it alone (limitRemaining).
	limitsOnly bool
}

// allLimited says whether every job of s that runs or waits, and every
// job of later, declared a time limit: then each ends by it, and a
// forecast can be made before any job has finished.
func allLimited(s *sched.Snapshot, later []Arrival) bool {
	for i := range s.Jobs {
		if !(s.Jobs[i].TimeLimitS > 0) {
			return false
		}
	}
	for i := range later {
		if !(later[i].Job.TimeLimitS > 0) {
			return false
		}
	}
	return len(s.Jobs)+len(later) > 0
}

// limitRemaining is the q-quantile of the remaining run time of j, which
// declared a time limit, when no finished job says what share of their
// limits jobs use: any share of what is left of its limit, alike (the
// uniform), so that the range's ends are the job ending now and at its
// limit and its likely end is halfway. Once jobs have finished, the shares
// they used take over (History.Remaining).
func limitRemaining(j *sched.Job, q float64) float64 {
	return min(max(q, 0), 1) * max(j.TimeLimitS-max(j.ExecutedS, 0), 0)
}

// add puts a job in the scenario, with its run time drawn; target says
// whether its start is forecast.
func (s *scen) add(j sched.Job, target bool) {
	m := simJob{team: -1, target: target}
	var rem float64
	if s.f.cfg.KnownRunTimes && j.DurationS > 0 {
		rem = max(j.DurationS-max(j.ExecutedS, 0), 0)
	} else if q := stratified(s.f.cfg.Seed, s.k, uint64(s.f.cfg.Samples), j.ID); s.limitsOnly {
		rem = limitRemaining(&j, q)
	} else {
		rem, _ = s.h.Remaining(&j, q)
		rem *= s.scale
	}
	if j.TimeLimitS > 0 {
		// The job is stopped at its time limit.
		rem = min(rem, max(j.TimeLimitS-max(j.ExecutedS, 0), 0))
	}
	m.dur = max(j.ExecutedS, 0) + rem
	if t, ok := s.teamIdx[j.Team]; ok {
		m.team = t
	}
	s.index[j.ID] = len(s.jobs)
	if j.State == sched.Running {
		// Its run so far: ExecutedS includes it.
		m.run = 1
		m.runStart = j.LastStartTime
		ran := max(s.now-j.LastStartTime, 0)
		m.execAt = j.ExecutedS - ran
		m.servAt = j.AttainedService - ran*heldGPUs(j)
		heap.Push(&s.ends, end{at: s.now + max(m.dur-j.ExecutedS, 0), id: j.ID, run: m.run})
	}
	s.jobs = append(s.jobs, j)
	s.meta = append(s.meta, m)
}

// run jumps from event to event, one pass per event, until every target
// has started, the budget or the horizon is reached, or nothing is left
// to happen.
func (s *scen) run() {
	cfg := &s.f.cfg
	for s.waiting > 0 {
		t, ok := s.next()
		if !ok && len(s.backlog)+len(s.expected) > 0 {
			// Nothing left to happen to the jobs in view: those behind
			// them may start all the same.
			s.window = math.MaxInt
			s.pass()
			continue
		}
		if !ok {
			s.quiet()
			return
		}
		if t > s.start+cfg.HorizonS {
			s.now = s.start + cfg.HorizonS
			s.res.truncated = true
			return
		}
		if s.res.visits+len(s.jobs) > s.budget {
			s.res.truncated = true
			return
		}
		// Events close to the next one are handled with it, in one pass
		// at the last of them.
		until := t + max(cfg.StepS, cfg.StepFrac*(t-s.start))
		at, happened := t, false
		for {
			e, ok := s.ends.peek()
			if !ok || e.at > until {
				break
			}
			heap.Pop(&s.ends)
			if s.finish(e) {
				at, happened = max(at, e.at), true
			}
		}
		for len(s.later) > 0 && s.later[0].At <= until {
			at, happened = max(at, s.later[0].At), true
			s.arrive(s.later[0].Job)
			s.later = s.later[1:]
		}
		for s.nextArr <= until {
			at, happened = max(at, s.nextArr), true
			s.arriveExpected()
		}
		if s.recheck > 0 && s.recheck <= until {
			at, happened = max(at, s.recheck), true
			s.recheck = 0
		}
		if !happened {
			// Only the ends of runs since preempted: nothing changed, and
			// a pass now would be one the live engine's and the
			// simulator's events would not make.
			continue
		}
		s.advance(at)
		s.pass()
	}
}

// next is the time of the next event, if any.
func (s *scen) next() (float64, bool) {
	t, ok := math.Inf(1), false
	if e, has := s.ends.peek(); has {
		t, ok = e.at, true
	}
	if len(s.later) > 0 && s.later[0].At < t {
		t, ok = s.later[0].At, true
	}
	if s.recheck > 0 && s.recheck < t {
		t, ok = s.recheck, true
	}
	if s.nextArr < t {
		t, ok = s.nextArr, true
	}
	return max(t, s.now), ok
}

// pending counts the jobs waiting in the scenario, behind the window
// too.
func (s *scen) pending() int {
	return s.inView() + len(s.backlog) + len(s.expected)
}

// inView counts the jobs waiting in the window.
func (s *scen) inView() int {
	n := 0
	for i := range s.jobs {
		if s.jobs[i].State == sched.Pending && !s.meta[i].done {
			n++
		}
	}
	return n
}

// admit moves jobs from behind the window into it until it holds
// s.window waiting jobs: the snapshot's in order, then the expected
// arrivals in theirs.
func (s *scen) admit() {
	if len(s.backlog) == 0 && len(s.expected) == 0 {
		return
	}
	for n := s.inView(); n < s.window && len(s.backlog)+len(s.expected) > 0; n++ {
		if len(s.backlog) == 0 {
			s.add(s.expected[0], false)
			s.expected = s.expected[1:]
			continue
		}
		j := s.snap[s.backlog[0]]
		if q, ok := s.queueAt[j.ID]; ok {
			j.Queue = q
		}
		s.add(j, true)
		s.backlog = s.backlog[1:]
	}
}

// Salts keep the draws of arrivals apart from those of run times.
const (
	saltGap  = 0x2545f4914f6cdd1d
	saltLike = 0x7f4a7c159e3779b9
)

// gap draws the time to the next expected arrival.
func (s *scen) gap() float64 {
	u := draw(s.f.cfg.Seed^saltGap, s.k, int64(s.drawn))
	return -math.Log(u) / s.arr.RatePerS
}

// arriveExpected adds the next expected arrival, a job like one of
// s.arr.Like with a negative ID of its own, unless s.maxQueue jobs wait
// already, and draws the one after.
func (s *scen) arriveExpected() {
	s.drawn++
	if s.pending() >= s.maxQueue {
		s.nextArr += s.gap()
		if s.nextArr > s.start+s.f.cfg.HorizonS {
			s.nextArr = math.Inf(1)
		}
		return
	}
	like := s.arr.Like[int(draw(s.f.cfg.Seed^saltLike, s.k, int64(s.drawn))*float64(len(s.arr.Like)))%len(s.arr.Like)]
	j := sched.Job{ID: -int64(s.drawn), Team: like.Team, User: like.User, GPUs: like.GPUs, GPUMemMiB: like.GPUMemMiB,
		SubmitTime: s.nextArr, Model: like.Model, Skew: like.Skew, Sharing: like.Sharing,
		MemPersistentMiB: like.MemPersistentMiB, MemEphemeralMiB: like.MemEphemeralMiB,
		CPUMilli: like.CPUMilli, MemMiB: like.MemMiB, CPUProfile: like.CPUProfile, CPUProfileSource: like.CPUProfileSource,
		TimeLimitS: like.TimeLimitS}
	if len(s.backlog)+len(s.expected) > 0 || s.inView() >= s.window {
		s.expected = append(s.expected, j) // behind the jobs that wait already
	} else {
		s.add(j, false)
	}
	s.nextArr += s.gap()
	if s.nextArr > s.start+s.f.cfg.HorizonS {
		s.nextArr = math.Inf(1)
	}
}

// addLeaving puts leaving job j in the scenario: it holds its GPUs, and
// neither starts nor is preempted, until at, when it has exited and
// waits again (finish), its start forecast.
func (s *scen) addLeaving(j sched.Job, at float64) {
	s.add(j, true)
	m := &s.meta[s.index[j.ID]]
	m.run = 1
	heap.Push(&s.ends, end{at: at, id: j.ID, run: m.run})
}

// finish ends a job's run when e names its current run; it reports
// whether it did. A leaving job's "end" is its exit: it waits again, with
// the service it had when asked to stop.
func (s *scen) finish(e end) bool {
	i, ok := s.index[e.id]
	if !ok || s.meta[i].run != e.run {
		return false // a run since preempted
	}
	if j := &s.jobs[i]; j.State == sched.Leaving {
		j.State, j.Placement, j.HeldGPUs = sched.Pending, nil, 0
		s.meta[i].run++
		if s.ending[e.id] {
			s.meta[i].done = true
			s.dirty = true
		}
		return true
	}
	if s.jobs[i].State != sched.Running {
		return false
	}
	s.stopRun(i, e.at)
	s.meta[i].done = true
	s.dirty = true
	return true
}

// arrive adds a job that joins the queue now.
func (s *scen) arrive(j sched.Job) {
	if _, dup := s.index[j.ID]; dup {
		return
	}
	j.State, j.Placement, j.HeldGPUs = sched.Pending, nil, 0
	s.add(j, true)
}

// advance moves the clock to t, adding the GPU-seconds held meanwhile to
// each team's usage.
func (s *scen) advance(t float64) {
	if t <= s.now {
		return
	}
	if len(s.teams) > 0 {
		used := make([]float64, len(s.teams))
		for i := range s.jobs {
			if s.jobs[i].State == sched.Running && s.meta[i].team >= 0 && !s.meta[i].done {
				used[s.meta[i].team] += float64(s.jobs[i].GPUs) * (t - s.now)
			}
		}
		for i := range s.teams {
			s.teams[i].UsageGPUSeconds = sched.DecayUsage(s.teams[i].UsageGPUSeconds, t-s.now, s.f.cfg.HalfLifeS, used[i])
		}
	}
	s.now = t
}

// pass runs one scheduling pass at s.now and applies its decisions.
func (s *scen) pass() {
	s.compact()
	s.admit()
	for i := range s.jobs {
		j := &s.jobs[i]
		if j.State == sched.Running {
			sv := usage.Service{ExecutedS: s.meta[i].execAt, GPUSeconds: s.meta[i].servAt}.Ran(s.now-s.meta[i].runStart, usage.Accrual{Held: heldGPUs(*j)})
			j.ExecutedS, j.AttainedService = sv.ExecutedS, sv.GPUSeconds
		}
	}
	s.startDue()
	s.res.passes++
	s.res.visits += len(s.jobs)
	// Promised jobs are seen on their GPUs, as the engine shows them.
	restore := s.promised.Present(s.jobs, s.now)
	d := s.f.fast.Schedule(s.snapshot())
	restore()
	s.apply(d)
}

// snapshot is the scenario's cluster at s.now, for a pass.
func (s *scen) snapshot() sched.Snapshot {
	return sched.Snapshot{Now: s.now, Nodes: s.nodes, Jobs: s.jobs, Teams: s.teams, GPUTimeDist: s.dist, Reservations: s.rsv}
}

// apply carries out a pass's decisions at s.now.
func (s *scen) apply(d sched.Decisions) {
	s.rsv = d.Reservations
	for _, qc := range d.QueueChanges {
		if i, ok := s.index[qc.JobID]; ok {
			s.jobs[i].Queue = qc.State
		} else if len(s.backlog) > 0 {
			if s.queueAt == nil {
				s.queueAt = make(map[int64]sched.QueueState)
			}
			s.queueAt[qc.JobID] = qc.State
		}
	}
	for _, p := range d.Preempts {
		delete(s.promised, p.JobID) // seen running on promised GPUs: it waits on
		if i, ok := s.index[p.JobID]; ok && s.jobs[i].State == sched.Running {
			if s.handover > 0 {
				s.leave(i, s.now+s.handover)
			} else {
				s.stopRun(i, s.now)
			}
		}
	}
	for _, st := range s.handOver(d.Starts) {
		if i, ok := s.index[st.JobID]; ok && s.jobs[i].State == sched.Pending {
			s.startRun(i, st.GPUs)
		}
	}
	s.recheck = 0
	if d.Recheck > s.now {
		s.recheck = d.Recheck
	}
}

// startRun starts waiting job i on gpus at s.now.
func (s *scen) startRun(i int, gpus []gpu.Ref) {
	j, m := &s.jobs[i], &s.meta[i]
	if _, started := s.res.starts[j.ID]; !started && m.target {
		s.res.starts[j.ID] = s.now
		s.waiting--
	}
	j.State, j.Placement, j.LastStartTime, j.HeldGPUs = sched.Running, gpus, s.now, 0
	m.run++
	m.runStart, m.execAt, m.servAt = s.now, j.ExecutedS, j.AttainedService
	heap.Push(&s.ends, end{at: s.now + max(m.dur-j.ExecutedS, 0), id: j.ID, run: m.run})
}

// leave asks running job i to stop at s.now: it holds its GPUs, its
// service as now, until at (finish), as a preempted job saving its
// checkpoint does.
func (s *scen) leave(i int, at float64) {
	j, m := &s.jobs[i], &s.meta[i]
	sv := usage.Service{ExecutedS: m.execAt, GPUSeconds: m.servAt}.Ran(max(s.now-m.runStart, 0), usage.Accrual{Held: heldGPUs(*j)})
	j.ExecutedS, j.AttainedService = sv.ExecutedS, sv.GPUSeconds
	j.State = sched.Leaving
	m.run++
	heap.Push(&s.ends, end{at: at, id: j.ID, run: m.run})
}

// handOver keeps back the starts on GPUs that leaving jobs still hold,
// promised to their jobs (sched.HandOver, Promises), and returns the
// others.
func (s *scen) handOver(starts []sched.Start) []sched.Start {
	if s.handover <= 0 || len(starts) == 0 {
		return starts
	}
	var held map[gpu.Ref]int64
	for i := range s.jobs {
		if j := &s.jobs[i]; j.State == sched.Leaving {
			for _, g := range j.Placement {
				if held == nil {
					held = make(map[gpu.Ref]int64)
				}
				held[g] = j.ID
			}
		}
	}
	if len(held) == 0 {
		return starts
	}
	now, waits := sched.HandOver(starts, held)
	if s.promised == nil {
		s.promised = make(sched.Promises)
	}
	s.promised.Keep(starts, waits, held)
	return now
}

// startDue makes the promised starts whose victims have all exited, on
// the GPUs promised, where the job still waits and they are free.
func (s *scen) startDue() {
	due := s.promised.Due(func(id int64) bool {
		i, ok := s.index[id]
		return ok && s.jobs[i].State == sched.Leaving
	})
	for _, st := range due {
		if i, ok := s.index[st.JobID]; ok && s.jobs[i].State == sched.Pending && s.free(st.GPUs) {
			s.startRun(i, st.GPUs)
		}
	}
}

// free tells whether no job holds any of gpus.
func (s *scen) free(gpus []gpu.Ref) bool {
	for i := range s.jobs {
		if j := &s.jobs[i]; (j.State == sched.Running || j.State == sched.Leaving) && !s.meta[i].done {
			for _, g := range j.Placement {
				if slices.Contains(gpus, g) {
					return false
				}
			}
		}
	}
	return true
}

// heldGPUs is what running job j holds for the rest of its run in a
// scenario: what it holds at the forecast (sched.Job.HeldGPUs, a shared
// GPU by its share), and its GPUs whole for a run the scenario starts.
// The scenario does not follow shares as sharers come and go.
func heldGPUs(j sched.Job) float64 {
	if j.HeldGPUs > 0 {
		return j.HeldGPUs
	}
	return float64(j.GPUs)
}

// stopRun ends job i's run at t: it waits again, with what it ran.
func (s *scen) stopRun(i int, t float64) {
	j, m := &s.jobs[i], &s.meta[i]
	sv := usage.Service{ExecutedS: m.execAt, GPUSeconds: m.servAt}.Ran(max(t-m.runStart, 0), usage.Accrual{Held: heldGPUs(*j)})
	j.ExecutedS, j.AttainedService = sv.ExecutedS, sv.GPUSeconds
	j.State, j.Placement, j.HeldGPUs = sched.Pending, nil, 0
	m.run++
}

// compact drops finished jobs, keeping the order of the rest.
func (s *scen) compact() {
	if !s.dirty {
		return
	}
	k := 0
	for i := range s.jobs {
		if s.meta[i].done {
			delete(s.index, s.jobs[i].ID)
			continue
		}
		if k != i {
			s.jobs[k], s.meta[k] = s.jobs[i], s.meta[i]
			s.index[s.jobs[k].ID] = k
		}
		k++
	}
	clear(s.jobs[k:])
	s.jobs, s.meta = s.jobs[:k], s.meta[:k]
	s.dirty = false
}

// quiet records that nothing is left to happen: the jobs still waiting
// cannot start. One explained pass says why each waits.
func (s *scen) quiet() {
	s.res.quiet = true
	s.compact()
	d := s.f.waits.Schedule(s.snapshot())
	s.res.passes++
	s.res.visits += len(s.jobs)
	s.res.causes = make(map[int64]sched.WaitCause, len(d.Waits))
	s.res.reasons = make(map[int64]string, len(d.Waits))
	for _, w := range d.Waits {
		s.res.causes[w.JobID], s.res.reasons[w.JobID] = w.Cause, w.Reason
	}
}

// normalQuantile is the p-quantile of the standard normal distribution.
func normalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

// Salt keeps the strata of run times apart from their draws within them.
const saltStratum = 0x632be59bd9b4e019

// stratified is job id's uniform draw in (0, 1) for sample k of n, Latin
// hypercube style: the n samples give each job one draw in each of the n
// strata [i/n, (i+1)/n), in an order of its own (the rank of sample k's
// hash among the n samples' hashes). Every job's run times then spread
// over its distribution in every forecast, where n independent draws may
// bunch: the median of the sampled starts strays less from the median of
// the starts (docs/forecast.md, third round). A sample k >= n draws
// independently.
func stratified(seed, k, n uint64, id int64) float64 {
	if k >= n || n < 2 {
		return draw(seed, k, id)
	}
	key := draw(seed^saltStratum, k, id)
	rank := 0
	for i := range n {
		if i != k {
			if v := draw(seed^saltStratum, i, id); v < key || (v == key && i < k) {
				rank++
			}
		}
	}
	return (float64(rank) + draw(seed, k, id)) / float64(n)
}

// draw is job id's uniform draw in (0, 1) for sample k: a hash, so that
// it depends on neither the order of the jobs nor the other draws.
func draw(seed, k uint64, id int64) float64 {
	x := seed ^ (k+1)*0xbf58476d1ce4e5b9 ^ uint64(id)*0x94d049bb133111eb
	// splitmix64's finalizer.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return (float64(x>>11) + 0.5) / (1 << 53)
}

// end is when a run is due to finish.
type end struct {
	at  float64
	id  int64
	run int
}

// ends is a heap of runs by finish time, then job ID, so that the order
// of equal times never depends on the heap's history.
type ends []end

func (h ends) Len() int { return len(h) }
func (h ends) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].id < h[j].id
}
func (h ends) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *ends) Push(x any)   { *h = append(*h, x.(end)) }
func (h *ends) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
func (h ends) peek() (end, bool) {
	if len(h) == 0 {
		return end{}, false
	}
	return h[0], true
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
