// Package forecast predicts when waiting jobs will start, by running the
// scheduling core forward from a snapshot of the cluster on a virtual
// clock.
//
// The method: every job is given a run time drawn from the run times of
// finished jobs (History), conditioned on how long it has already run, so
// that a job that has run long is expected to run longer. The scheduler
// then runs pass after pass, as the simulator does, with jobs finishing
// when their run time is up, until every waiting job has started (or the
// forecast's budget is spent). This is done once per quantile of the
// run-time model (Config.Quantiles): in the first scenario every job runs
// as briefly as the low quantile says, in the last as long as the high
// one does. A job's forecast is the range of its start over the
// scenarios, and its start in the middle one. No job arrives in a
// forecast that has not been submitted, so a job that later arrivals may
// overtake (a preemptive policy ranks new jobs first) starts later than
// forecast; the portal measures how often (calibration).
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

	"github.com/gpuportal/gpuportal/core/sched"
)

// Defaults applied to zero Config fields.
var (
	// DefaultQuantiles are the run-time quantiles of the three scenarios:
	// the optimistic one, the median one and the pessimistic one.
	DefaultQuantiles = []float64{0.2, 0.5, 0.8}
)

const (
	// DefaultBudget bounds one scenario's work: the jobs the scheduler
	// looks at, summed over its passes (so 2,000 passes over 1,000 jobs,
	// or 200 over 10,000).
	DefaultBudget = 2_000_000
	// DefaultHorizonS is how far ahead a forecast looks: 7 days.
	DefaultHorizonS = 7 * 24 * 3600.0
	// DefaultStepS and DefaultStepFrac set how finely events are told
	// apart: events less than max(StepS, StepFrac x the time since the
	// forecast began) after the next one are handled in one pass with it.
	DefaultStepS    = 1.0
	DefaultStepFrac = 0.01
)

// Config sets up a Forecaster.
type Config struct {
	// Sched is the configuration of the scheduler whose decisions are
	// forecast: the live one.
	Sched sched.Config
	// Quantiles of the run-time model, in increasing order, one scenario
	// each; the middle one (the lower middle of an even number) gives the
	// likely start. Nil means DefaultQuantiles.
	Quantiles []float64
	// Budget bounds each scenario's work (see DefaultBudget); jobs not
	// started within it are forecast to start later than the scenario
	// reached (StateLater).
	Budget int
	// HorizonS bounds how far ahead a forecast looks, in seconds.
	HorizonS float64
	// StepS and StepFrac: see DefaultStepS.
	StepS, StepFrac float64
	// MinHistory is how many finished jobs the history needs for any
	// forecast; 0 means DefaultMinHistory.
	MinHistory int
	// HalfLifeS is the half-life of team usage under fair share, as the
	// live engine decays it; 0 or less means no decay.
	HalfLifeS float64
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
	// Quantiles are the scenarios' run-time quantiles.
	Quantiles []float64
	// Passes is the scheduling passes run over all scenarios, and Visits
	// the jobs they looked at in all: the forecast's cost.
	Passes, Visits int
	// Truncated tells whether some scenario stopped at the budget or the
	// horizon with jobs still waiting.
	Truncated bool
	// History says what run times the forecast learned from.
	History string
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

// Input is what one forecast starts from.
type Input struct {
	// Snapshot is the cluster now, as the live pass saw it.
	Snapshot sched.Snapshot
	// Later are jobs that join the queue after Snapshot.Now.
	Later []Arrival
	// History is what run times are drawn from.
	History *History
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
	if cfg.Quantiles == nil {
		cfg.Quantiles = DefaultQuantiles
	}
	if err := checkQuantiles(cfg.Quantiles); err != nil {
		return nil, fmt.Errorf("forecast: %w", err)
	}
	cfg.Quantiles = slices.Clone(cfg.Quantiles)
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
	if cfg.MinHistory <= 0 {
		cfg.MinHistory = DefaultMinHistory
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
func (f *Forecaster) Config() Config {
	c := f.cfg
	c.Quantiles = slices.Clone(c.Quantiles)
	return c
}

// Forecast forecasts the start of every waiting job of in.
func (f *Forecaster) Forecast(in Input) Result {
	s := in.Snapshot
	res := Result{Now: s.Now, Quantiles: slices.Clone(f.cfg.Quantiles), History: in.History.Describe()}
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
	never := nevers(&s, first.Waits)
	startsNow := make(map[int64]bool, len(first.Starts))
	for _, st := range first.Starts {
		startsNow[st.JobID] = true
	}

	known := in.History.Len() >= f.cfg.MinHistory
	var runs []scenarioResult
	if known {
		for _, q := range f.cfg.Quantiles {
			r := f.scenario(in, first, q)
			res.Passes += r.passes
			res.Visits += r.visits
			res.Truncated = res.Truncated || (r.truncated && len(r.starts) < len(targets))
			runs = append(runs, r)
		}
	}
	mid := (len(f.cfg.Quantiles) - 1) / 2
	for _, id := range targets {
		fc := Forecast{JobID: id}
		switch n, ok := never[id]; {
		case ok:
			fc.State, fc.Reason, fc.Cause = StateNever, n.reason, n.cause
		case startsNow[id]:
			fc.State, fc.Earliest, fc.Likely, fc.Latest = StateExpected, s.Now, s.Now, s.Now
		case !known:
			fc.State = StateUnknown
			fc.Reason = "run times are not known yet: " + strconv.Itoa(in.History.Len()) + " of the " +
				strconv.Itoa(f.cfg.MinHistory) + " finished jobs a forecast needs"
		default:
			fc = combine(id, runs, mid)
		}
		res.Jobs = append(res.Jobs, fc)
	}
	return res
}

// combine makes job id's forecast from its start in each scenario.
func combine(id int64, runs []scenarioResult, mid int) Forecast {
	fc := Forecast{JobID: id}
	all, some := true, false
	for i, r := range runs {
		at, ok := r.starts[id]
		if !ok {
			all = false
			continue
		}
		if !some || at < fc.Earliest {
			fc.Earliest = at
		}
		if at > fc.Latest {
			fc.Latest = at
		}
		if i == mid {
			fc.Likely = at
		}
		some = true
	}
	if some {
		fc.State = StateExpected
		if !all {
			fc.Latest = 0
		}
		return fc
	}
	for _, r := range runs {
		if r.quiet {
			fc.State, fc.Cause = StateNever, r.causes[id]
			fc.Reason = "cannot start with the cluster as it is, even once every other job has finished"
			if w := r.reasons[id]; w != "" {
				fc.Reason += ": " + w
			}
			return fc
		}
	}
	// Started in no scenario within its reach: not before the optimistic
	// scenario's end.
	fc.State = StateLater
	fc.Earliest = runs[0].reached
	for _, r := range runs[1:] {
		fc.Earliest = min(fc.Earliest, r.reached)
	}
	fc.Reason = "not started within the forecast's reach"
	return fc
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
		if t.Name != team {
			continue
		}
		if c := t.UserCaps[user]; c > 0 {
			return c
		}
		return max(t.MaxGPUsPerUser, 0)
	}
	return 0
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
	team     int // index in the scenario's teams, or -1
}

// scenario runs the scheduler forward with every job running for the
// q-quantile of its remaining run time, starting from the first pass's
// decisions.
func (f *Forecaster) scenario(in Input, first sched.Decisions, q float64) scenarioResult {
	s := &scen{f: f, q: q, h: in.History, now: in.Snapshot.Now, start: in.Snapshot.Now,
		nodes: in.Snapshot.Nodes, dist: in.Snapshot.GPUTimeDist,
		res: scenarioResult{starts: make(map[int64]float64)}}
	s.teams = slices.Clone(in.Snapshot.Teams)
	s.teamIdx = make(map[string]int, len(s.teams))
	for i, t := range s.teams {
		s.teamIdx[t.Name] = i
	}
	s.later = slices.Clone(in.Later)
	slices.SortStableFunc(s.later, func(a, b Arrival) int { return cmpFloat(a.At, b.At) })
	s.jobs = make([]sched.Job, 0, len(in.Snapshot.Jobs)+len(in.Later))
	s.meta = make([]simJob, 0, cap(s.jobs))
	s.index = make(map[int64]int, cap(s.jobs))
	for _, j := range in.Snapshot.Jobs {
		s.add(j)
	}
	s.waiting = len(in.Later)
	for i := range s.jobs {
		if s.jobs[i].State == sched.Pending {
			s.waiting++
		}
	}
	s.apply(first)
	s.res.passes, s.res.visits = 0, 0 // the first pass is counted once, by Forecast
	s.run()
	s.res.reached = s.now
	return s.res
}

// scen is one scenario's state.
type scen struct {
	f     *Forecaster
	q     float64
	h     *History
	now   float64
	start float64
	nodes []sched.Node
	dist  *sched.GPUTimeDist

	jobs  []sched.Job // unfinished jobs, the scheduler's view
	meta  []simJob    // index for index with jobs
	index map[int64]int
	dirty bool // some job finished: jobs needs compacting

	teams   []sched.Team
	teamIdx map[string]int

	later   []Arrival // jobs still to arrive, by time
	ends    ends
	recheck float64
	waiting int // targets not yet started
	res     scenarioResult
}

// add puts a job in the scenario, with its run time drawn.
func (s *scen) add(j sched.Job) {
	m := simJob{team: -1}
	rem, _ := s.h.Remaining(&j, s.q)
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
		m.servAt = j.AttainedService - ran*float64(j.GPUs)
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
		if !ok {
			s.quiet()
			return
		}
		if t > s.start+cfg.HorizonS {
			s.now = s.start + cfg.HorizonS
			s.res.truncated = true
			return
		}
		if s.res.visits+len(s.jobs) > cfg.Budget {
			s.res.truncated = true
			return
		}
		// Events close to the next one are handled with it, in one pass
		// at the last of them.
		until := t + max(cfg.StepS, cfg.StepFrac*(t-s.start))
		at := t
		for {
			e, ok := s.ends.peek()
			if !ok || e.at > until {
				break
			}
			heap.Pop(&s.ends)
			if s.finish(e) {
				at = max(at, e.at)
			}
		}
		for len(s.later) > 0 && s.later[0].At <= until {
			at = max(at, s.later[0].At)
			s.arrive(s.later[0].Job)
			s.later = s.later[1:]
		}
		if s.recheck > 0 && s.recheck <= until {
			at = max(at, s.recheck)
			s.recheck = 0
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
	return max(t, s.now), ok
}

// finish ends a job's run when e names its current run; it reports
// whether it did.
func (s *scen) finish(e end) bool {
	i, ok := s.index[e.id]
	if !ok || s.meta[i].run != e.run || s.jobs[i].State != sched.Running {
		return false // a run since preempted
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
	j.State, j.Placement = sched.Pending, nil
	s.add(j)
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
	for i := range s.jobs {
		j := &s.jobs[i]
		if j.State == sched.Running {
			ran := s.now - s.meta[i].runStart
			j.ExecutedS = s.meta[i].execAt + ran
			j.AttainedService = s.meta[i].servAt + ran*float64(j.GPUs)
		}
	}
	s.res.passes++
	s.res.visits += len(s.jobs)
	d := s.f.fast.Schedule(sched.Snapshot{Now: s.now, Nodes: s.nodes, Jobs: s.jobs, Teams: s.teams, GPUTimeDist: s.dist})
	s.apply(d)
}

// apply carries out a pass's decisions at s.now.
func (s *scen) apply(d sched.Decisions) {
	for _, qc := range d.QueueChanges {
		if i, ok := s.index[qc.JobID]; ok {
			s.jobs[i].Queue = qc.State
		}
	}
	for _, p := range d.Preempts {
		if i, ok := s.index[p.JobID]; ok && s.jobs[i].State == sched.Running {
			s.stopRun(i, s.now)
		}
	}
	for _, st := range d.Starts {
		i, ok := s.index[st.JobID]
		if !ok || s.jobs[i].State != sched.Pending {
			continue
		}
		j, m := &s.jobs[i], &s.meta[i]
		if _, started := s.res.starts[j.ID]; !started {
			s.res.starts[j.ID] = s.now
			s.waiting--
		}
		j.State, j.Placement, j.LastStartTime = sched.Running, st.GPUs, s.now
		m.run++
		m.runStart, m.execAt, m.servAt = s.now, j.ExecutedS, j.AttainedService
		heap.Push(&s.ends, end{at: s.now + max(m.dur-j.ExecutedS, 0), id: j.ID, run: m.run})
	}
	s.recheck = 0
	if d.Recheck > s.now {
		s.recheck = d.Recheck
	}
}

// stopRun ends job i's run at t: it waits again, with what it ran.
func (s *scen) stopRun(i int, t float64) {
	j, m := &s.jobs[i], &s.meta[i]
	ran := max(t-m.runStart, 0)
	j.ExecutedS = m.execAt + ran
	j.AttainedService = m.servAt + ran*float64(j.GPUs)
	j.State, j.Placement = sched.Pending, nil
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
	d := s.f.waits.Schedule(sched.Snapshot{Now: s.now, Nodes: s.nodes, Jobs: s.jobs, Teams: s.teams, GPUTimeDist: s.dist})
	s.res.passes++
	s.res.visits += len(s.jobs)
	s.res.causes = make(map[int64]sched.WaitCause, len(d.Waits))
	s.res.reasons = make(map[int64]string, len(d.Waits))
	for _, w := range d.Waits {
		s.res.causes[w.JobID], s.res.reasons[w.JobID] = w.Cause, w.Reason
	}
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
