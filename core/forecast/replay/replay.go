// Package replay measures start-time forecasts on a trace: it replays the
// trace through the simulator and, at each job's arrival, forecasts its
// start from the simulator's snapshot and the run times of the jobs
// finished so far, as the live engine would, then sets the forecast
// against the start the simulation gives it.
package replay

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
)

// Config is one measurement's setup.
type Config struct {
	// Sim is the simulation; its Observer is replaced.
	Sim sim.Config
	// Forecast is the forecaster's setup; its Sched is taken from Sim.
	Forecast forecast.Config
	// Every forecasts one arrival in Every (1, or 0, for all): a cheaper
	// measurement of a long trace.
	Every int
	// HistoryLimit bounds the finished jobs the forecasts learn from, the
	// most recent first, as the live engine does; 0 means 5,000.
	HistoryLimit int
	// NoArrivals leaves expected arrivals out of the forecasts; by default
	// they expect jobs like the last ArrivalWindow arrivals, at their rate.
	NoArrivals    bool
	ArrivalWindow int
	// KnownArrivals is a diagnostic (sim --forecast-oracle arrivals): the
	// forecasts are given the trace's next KnownArrivalsMax submissions
	// within KnownArrivalsS, as they come, in place of expected arrivals.
	KnownArrivals bool
}

// The bounds of Config.KnownArrivals: the next 200 submissions within a
// day (a forecast runs until each of them has started too).
const (
	KnownArrivalsMax = 200
	KnownArrivalsS   = 86400
)

// Report is how the forecasts did.
type Report struct {
	Policy string `json:"policy"`
	// Waits counts the times a job began to wait: on arrival, or when it
	// was preempted. StartedAtOnce counts those that started in the very
	// pass that first saw them waiting (nothing to forecast); Forecast
	// the waits forecast (one in Every of the others).
	Waits         int `json:"waits"`
	StartedAtOnce int `json:"started_at_once"`
	Forecast      int `json:"forecast"`
	// States counts the forecasts by state.
	States map[forecast.State]int `json:"states"`
	// Calibration compares each forecast with the start that ended its
	// wait in the simulation; Arrivals and Resumes split it between
	// waits that began on arrival and after a preemption.
	Calibration forecast.Calibration `json:"calibration"`
	Arrivals    forecast.Calibration `json:"arrivals"`
	Resumes     forecast.Calibration `json:"resumes"`
	// Short and Long split it between waits shorter than ShortWaitS
	// (forecast to start) and the others: a fifth of a short wait is a
	// few seconds, less than a pass or a job's start takes.
	Short forecast.Calibration `json:"short"`
	Long  forecast.Calibration `json:"long"`
	// Passes and Visits are the forecasts' cost (forecast.Result),
	// summed; Sim is the simulation's own result.
	Passes int         `json:"forecast_passes"`
	Visits int         `json:"forecast_visits"`
	Sim    *sim.Result `json:"sim"`
}

// ShortWaitS bounds the short waits of Report.Short: under a minute from
// forecast to start.
const ShortWaitS = 60

// Run replays jobs under cfg and reports how the forecasts did.
func Run(ctx context.Context, jobs []trace.Job, cfg Config) (*Report, error) {
	fcfg := cfg.Forecast
	fcfg.Sched = cfg.Sim.Sched
	if fcfg.HalfLifeS == 0 {
		fcfg.HalfLifeS = cfg.Sim.HalfLifeS
	}
	f, err := forecast.New(fcfg)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	o := &observer{f: f, every: max(cfg.Every, 1), limit: cfg.HistoryLimit, handoverS: cfg.Sim.HandoverS, asked: make(map[int64]float64),
		byID: make(map[int64]*trace.Job, len(jobs)), state: make(map[int64]uint8, len(jobs)), limits: make(map[int64]float64),
		open: make(map[int64]*wait), rep: &Report{Policy: cfg.Sim.Sched.Policy, States: make(map[forecast.State]int)}}
	if o.limit <= 0 {
		o.limit = 5000
	}
	o.window = cfg.ArrivalWindow
	if o.window <= 0 {
		o.window = 100
	}
	o.arrivals = !cfg.NoArrivals
	for i := range jobs {
		o.byID[jobs[i].ID] = &jobs[i]
	}
	if cfg.KnownArrivals {
		o.arrivals = false
		o.future = make([]*trace.Job, len(jobs))
		for i := range jobs {
			o.future[i] = &jobs[i]
		}
		slices.SortStableFunc(o.future, func(a, b *trace.Job) int { return cmp.Compare(a.Submit, b.Submit) })
	}
	sc := cfg.Sim
	sc.Observer = o
	res, err := sim.Run(ctx, jobs, sc)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	o.rep.Sim = res
	var all, arrivals, resumes, short, long []forecast.Outcome
	for _, w := range o.done {
		all = append(all, w.Outcome)
		if w.resume {
			resumes = append(resumes, w.Outcome)
		} else {
			arrivals = append(arrivals, w.Outcome)
		}
		if w.Start-w.MadeAt < ShortWaitS {
			short = append(short, w.Outcome)
		} else {
			long = append(long, w.Outcome)
		}
	}
	o.rep.Calibration = forecast.Calibrate(all, 0)
	o.rep.Arrivals = forecast.Calibrate(arrivals, 0)
	o.rep.Resumes = forecast.Calibrate(resumes, 0)
	o.rep.Short = forecast.Calibrate(short, 0)
	o.rep.Long = forecast.Calibrate(long, 0)
	return o.rep, nil
}

// The states of a job as the observer knows it.
const (
	unseen uint8 = iota
	waiting
	running
)

// wait is one forecast wait of a job, until its next start.
type wait struct {
	forecast.Outcome
	resume bool
}

// observer forecasts waits and records starts (sim.Observer).
type observer struct {
	f     *forecast.Forecaster
	every int
	// handoverS is the simulator's handover, and asked when each job it
	// preempted was asked to stop: the forecasts know when leaving jobs
	// leave and hold the GPUs of the jobs they preempt as long, as the
	// live engine's do (forecast.Input.Leaving, HandoverS).
	handoverS float64
	asked     map[int64]float64
	limit     int
	byID      map[int64]*trace.Job
	state     map[int64]uint8
	limits    map[int64]float64 // each job's time limit as the scheduler sees it
	waits     int               // waits not started at once, for Every

	samples []forecast.Sample
	hist    *forecast.History
	histN   int // len(samples) when hist was built

	open map[int64]*wait // forecast waits not yet ended by a start
	done []*wait
	rep  *Report

	arrivals bool
	window   int
	recent   []arrived // the last window arrivals, oldest first
	// future holds every job by submit time under Config.KnownArrivals.
	future []*trace.Job
}

type arrived struct {
	at  float64
	job sched.Job
}

// expected is what arrivals to expect: jobs like the recent ones, at
// their rate; nil before 5 have arrived.
func (o *observer) expected(now float64) *forecast.Arrivals {
	if !o.arrivals || len(o.recent) < 5 {
		return nil
	}
	span := now - o.recent[0].at
	if !(span > 0) {
		return nil
	}
	a := &forecast.Arrivals{RatePerS: float64(len(o.recent)) / span}
	for _, r := range o.recent {
		a.Like = append(a.Like, r.job)
	}
	return a
}

// leaving is when each leaving job of s is out, from when it was
// preempted, and records the preemptions of d.
func (o *observer) leaving(s sched.Snapshot, d sched.Decisions) map[int64]float64 {
	if o.handoverS <= 0 {
		return nil
	}
	var out map[int64]float64
	for i := range s.Jobs {
		if j := &s.Jobs[i]; j.State == sched.Leaving {
			if at, ok := o.asked[j.ID]; ok {
				if out == nil {
					out = make(map[int64]float64)
				}
				out[j.ID] = at + o.handoverS
			}
		} else {
			delete(o.asked, j.ID)
		}
	}
	for _, p := range d.Preempts {
		o.asked[p.JobID] = s.Now
	}
	return out
}

func (o *observer) Pass(s sched.Snapshot, d sched.Decisions) {
	leaving := o.leaving(s, d)
	startsNow := make(map[int64]bool, len(d.Starts))
	for _, st := range d.Starts {
		startsNow[st.JobID] = true
	}
	type ask struct {
		id     int64
		resume bool
	}
	var asks []ask
	for i := range s.Jobs {
		j := &s.Jobs[i]
		was := o.state[j.ID]
		if j.State != sched.Pending || was == waiting {
			continue
		}
		if was == unseen {
			if j.TimeLimitS > 0 {
				o.limits[j.ID] = j.TimeLimitS
			}
			jj := *j
			jj.Placement, jj.Queue = nil, sched.QueueState{}
			o.recent = append(o.recent, arrived{at: s.Now, job: jj})
			if len(o.recent) > o.window {
				o.recent = o.recent[1:]
			}
		}
		o.state[j.ID] = waiting
		o.rep.Waits++
		if startsNow[j.ID] {
			o.rep.StartedAtOnce++
			continue
		}
		o.waits++
		if o.waits%o.every == 0 {
			asks = append(asks, ask{id: j.ID, resume: was == running})
		}
	}
	if len(asks) == 0 {
		return
	}
	r := o.f.Forecast(forecast.Input{Snapshot: s, History: o.history(), Arrivals: o.expected(s.Now), Later: o.known(s.Now),
		Leaving: leaving, HandoverS: o.handoverS})
	o.rep.Passes += r.Passes
	o.rep.Visits += r.Visits
	for _, a := range asks {
		fc, ok := r.Job(a.id)
		if !ok {
			continue
		}
		o.rep.Forecast++
		o.rep.States[fc.State]++

		o.open[a.id] = &wait{Outcome: forecast.Outcome{State: fc.State, Earliest: fc.Earliest, Likely: fc.Likely, Latest: fc.Latest, MadeAt: s.Now}, resume: a.resume}
	}
}

// known is the jobs submitted after now, as they come (Config.KnownArrivals;
// nil without it), as the simulator shows them to the scheduler.
func (o *observer) known(now float64) []forecast.Arrival {
	if o.future == nil {
		return nil
	}
	i, _ := slices.BinarySearchFunc(o.future, now, func(j *trace.Job, t float64) int {
		if j.Submit <= t {
			return -1
		}
		return 1
	})
	var out []forecast.Arrival
	for _, tj := range o.future[i:] {
		if len(out) == KnownArrivalsMax || tj.Submit > now+KnownArrivalsS {
			break
		}
		j := sched.Job{ID: tj.ID, Team: tj.Team, User: tj.User, GPUs: tj.GPUs, GPUMemMiB: tj.GPUMemMiB, SubmitTime: tj.Submit,
			State: sched.Pending, DurationS: tj.Duration, TimeLimitS: tj.TimeLimitS, Model: tj.Model, CPUMilli: tj.CPUMilli, MemMiB: tj.MemMiB}
		if tj.GPUMilli > 0 && tj.GPUMilli < 1000 {
			j.GPUFraction = float64(tj.GPUMilli) / 1000
		}
		out = append(out, forecast.Arrival{Job: j, At: tj.Submit})
	}
	return out
}

// history is the run times of the jobs finished so far, the most recent
// limit of them.
func (o *observer) history() *forecast.History {
	if o.hist == nil || o.histN != len(o.samples) {
		from := max(0, len(o.samples)-o.limit)
		o.hist, o.histN = forecast.NewHistory(o.samples[from:], 0), len(o.samples)
	}
	return o.hist
}

func (o *observer) Started(id int64, at float64) {
	o.state[id] = running
	if w := o.open[id]; w != nil {
		w.Start = at
		o.done = append(o.done, w)
		delete(o.open, id)
	}
}

func (o *observer) Finished(id int64, _, executedS float64) {
	tj := o.byID[id]
	if tj == nil {
		return
	}
	o.samples = append(o.samples, forecast.Sample{User: tj.User, Team: tj.Team, Model: tj.Model, RunS: executedS, LimitS: o.limits[id], GPUs: tj.GPUs})
	delete(o.limits, id)
}
