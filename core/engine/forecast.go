package engine

import (
	"context"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/sched"
)

// The engine forecasts when each waiting job starts (core/forecast) from
// the snapshot of a scheduling pass: beside the loop, not in it, a few
// seconds apart and soon after anything changes, never spending more than
// a tenth of the time it runs. Each forecast is published whole (Forecast,
// ForecastInfo), so that every page, the API and the CLI show the same
// one, and recorded (the first of each job, and one at each checkpoint of
// its wait) to measure how good forecasts are.

// ForecastConfig sets up the engine's start forecasts.
type ForecastConfig struct {
	// Every is the longest time between two forecasts while jobs wait
	// (default 5 s). A forecast also follows any change of the jobs (a
	// submit, a start, an end) once MinGap (default 1 s) has passed since
	// the last. A forecast that took d is followed by none for 10 d.
	Every, MinGap time.Duration
	// Forecaster configures the forecasts; its Sched is the engine's
	// scheduler's configuration, and its HalfLifeS the engine's HalfLife.
	Forecaster forecast.Config
	// HistoryLimit is how many recently finished jobs run times are drawn
	// from (default 5,000). Arrivals are expected like the submissions
	// of the last ArrivalWindow (default 1 h), at most ArrivalLimit of
	// them (default 200), at the rate of those of the last
	// ArrivalRateWindow (default 5 min): a burst older than that (a
	// demo's or a day's opening) no longer counts in the rate.
	HistoryLimit      int
	ArrivalWindow     time.Duration
	ArrivalLimit      int
	ArrivalRateWindow time.Duration
	// Sync forecasts inside the scheduling pass instead of beside it, for
	// tests that drive passes by hand.
	Sync bool
	// Off turns forecasts off.
	Off bool
}

// ForecastStore is the part of Store that forecasts read and record
// through.
type ForecastStore interface {
	// FinishedRunTimes returns up to limit recently finished jobs' run
	// times, with who ran what.
	FinishedRunTimes(ctx context.Context, limit int) ([]forecast.Sample, error)
	// RecentSubmissions returns up to limit jobs submitted since then,
	// newest first.
	RecentSubmissions(ctx context.Context, since time.Time, limit int) ([]Job, error)
	// RecordForecasts keeps forecasts; a job's second of one kind is
	// dropped.
	RecordForecasts(ctx context.Context, rs []ForecastRecord) error
}

// LatestForecastStore is the part of Store that keeps each waiting job's
// latest forecast, so that follower replicas, which run no engine, show
// the leader's forecasts.
type LatestForecastStore interface {
	// SetLatestForecasts replaces the latest forecasts of rs's jobs
	// (their Kind is ignored).
	SetLatestForecasts(ctx context.Context, rs []ForecastRecord) error
}

// ForecastRecord is one forecast of a job's start, kept to measure
// forecasts against the starts that follow them.
type ForecastRecord struct {
	JobID int64
	// Kind is "first" for a job's first forecast, else the checkpoint of
	// its wait it was made at (ForecastCheckpoints).
	Kind                     string
	MadeAt                   time.Time
	State                    forecast.State
	Earliest, Likely, Latest *time.Time
	Reason                   string
}

// ForecastCheckpoints are the ages of a job (time since its submission)
// at which a forecast is recorded besides its first, and the names of
// their kinds.
var ForecastCheckpoints = []struct {
	Kind string
	Age  time.Duration
}{{"1m", time.Minute}, {"5m", 5 * time.Minute}, {"15m", 15 * time.Minute}, {"1h", time.Hour}, {"4h", 4 * time.Hour}}

// JobForecast is a waiting job's start forecast, on the wall clock: a
// zero time is none (forecast.Forecast).
type JobForecast struct {
	State                    forecast.State
	Earliest, Likely, Latest time.Time
	Reason                   string
	MadeAt                   time.Time
}

// ForecastInfo describes the latest forecast.
type ForecastInfo struct {
	MadeAt time.Time
	// Took is how long it took; Passes and Visits what it cost
	// (forecast.Result).
	Took           time.Duration
	Passes, Visits int
	// Jobs counts the waiting jobs it forecast.
	Jobs      int
	Truncated bool
	// History says what run times it learned from; ArrivalsPerHour the
	// arrivals it expected (0: none).
	History         string
	ArrivalsPerHour float64
	// Samples and Range are the forecaster's (forecast.Config).
	Samples int
	Range   [2]float64
	// Made counts the forecasts made since the engine started.
	Made int64
}

// forecasts is the engine's forecasting state.
type forecasts struct {
	cfg ForecastConfig
	f   *forecast.Forecaster

	mu   sync.Mutex // guards jobs and info
	jobs map[int64]JobForecast
	info ForecastInfo

	done chan forecastDone // a forecast made beside the loop, to record

	// Owned by the Run goroutine.
	inFlight bool
	lastAt   time.Time
	lastCost time.Duration
	sig      uint64
	hist     *forecast.History
	histAt   time.Time
	histSig  uint64
	arr      *forecast.Arrivals
	arrAt    time.Time
	recorded map[int64]uint8       // kinds recorded per job: bit 0 first, bit i checkpoint i-1
	stored   map[int64]JobForecast // the latest forecasts stored (LatestForecastStore)
}

type forecastDone struct {
	madeAt    time.Time
	res       forecast.Result
	startsNow map[int64]bool // started by the pass the forecast came from
}

func newForecasts(cfg *Config) (*forecasts, error) {
	fc := &cfg.Forecast
	if fc.Every <= 0 {
		fc.Every = 5 * time.Second
	}
	if fc.MinGap <= 0 {
		fc.MinGap = time.Second
	}
	if fc.HistoryLimit <= 0 {
		fc.HistoryLimit = 5000
	}
	if fc.ArrivalWindow <= 0 {
		fc.ArrivalWindow = time.Hour
	}
	if fc.ArrivalLimit <= 0 {
		fc.ArrivalLimit = 200
	}
	if fc.ArrivalRateWindow <= 0 {
		fc.ArrivalRateWindow = 5 * time.Minute
	}
	fcfg := fc.Forecaster
	fcfg.Sched = cfg.Scheduler.Config()
	if fcfg.HalfLifeS == 0 {
		fcfg.HalfLifeS = halfLifeSeconds(cfg.HalfLife)
	}
	f, err := forecast.New(fcfg)
	if err != nil {
		return nil, err
	}
	c := f.Config()
	return &forecasts{cfg: *fc, f: f, jobs: map[int64]JobForecast{}, done: make(chan forecastDone, 1),
		recorded: map[int64]uint8{}, info: ForecastInfo{Samples: c.Samples, Range: c.Range}}, nil
}

// Forecast is job id's start forecast from the latest forecast, if it
// was waiting then.
func (e *Engine) Forecast(id int64) (JobForecast, bool) {
	e.fc.mu.Lock()
	defer e.fc.mu.Unlock()
	f, ok := e.fc.jobs[id]
	return f, ok
}

// ForecastInfo describes the latest forecast.
func (e *Engine) ForecastInfo() ForecastInfo {
	e.fc.mu.Lock()
	defer e.fc.mu.Unlock()
	return e.fc.info
}

// forecast records a forecast made since the last pass, and starts the
// next one when it is due. snap and d are the pass's snapshot and
// decisions; jobs are all the unfinished jobs it read, those waiting out
// a retry backoff included.
func (e *Engine) forecast(ctx context.Context, snap sched.Snapshot, d sched.Decisions, jobs []Job, now time.Time) {
	fc := e.fc
	if fc.cfg.Off {
		return
	}
	select {
	case r := <-fc.done:
		fc.inFlight = false
		fc.lastCost = e.ForecastInfo().Took
		e.recordForecast(ctx, r, jobs)
	default:
	}
	if fc.inFlight {
		return
	}
	sig, waiting := jobsSignature(jobs)
	gap := now.Sub(fc.lastAt)
	due := gap >= max(fc.cfg.Every, 10*fc.lastCost) || (sig != fc.sig && gap >= max(fc.cfg.MinGap, 10*fc.lastCost))
	if !due {
		return
	}
	fc.sig, fc.lastAt = sig, now
	if waiting == 0 {
		fc.publish(forecastDone{madeAt: now}, 0)
		return
	}
	e.loadForecastInputs(ctx, now, sig)
	exits := e.exitTimes()
	in := forecast.Input{Snapshot: snap, History: fc.hist, Arrivals: fc.arr, HandoverS: exits.expected()}
	// The pass goes on with its snapshot: the forecast gets its own.
	in.Snapshot.Jobs = append([]sched.Job(nil), snap.Jobs...)
	in.Snapshot.Teams = append([]sched.Team(nil), snap.Teams...)
	var byID *passJobs
	for i := range in.Snapshot.Jobs {
		// A leaving job was shown without the GPUs promised to another
		// (Promises.Present); it waits again, for all of its own, once
		// out: when stopped runs have taken to leave so far.
		if sj := &in.Snapshot.Jobs[i]; sj.State == sched.Leaving {
			if byID == nil {
				byID = newPassJobs(jobs)
			}
			if k, ok := byID.find(sj.ID); ok {
				sj.GPUs = jobs[k].GPUs
			}
			if r := e.runs[sj.ID]; r != nil && !r.stopAsked.IsZero() {
				if likely, _, ok := exits.of(r.stopAsked, snap.Now); ok {
					if in.Leaving == nil {
						in.Leaving = make(map[int64]float64)
					}
					in.Leaving[sj.ID] = likely
				}
				if r.stop.Final() {
					// Cancelled, past its time limit, failed: it does not
					// wait again.
					if in.Ending == nil {
						in.Ending = make(map[int64]bool)
					}
					in.Ending[sj.ID] = true
				}
			}
		}
	}
	gpuMiB := smallestGPU(snap.Nodes)
	for i := range jobs {
		if j := &jobs[i]; j.State.Waiting() && j.RetryAt != nil && j.RetryAt.After(now) {
			in.Later = append(in.Later, forecast.Arrival{Job: e.schedJob(j, now, gpuMiB), At: seconds(*j.RetryAt)})
		}
	}
	startsNow := make(map[int64]bool, len(d.Starts))
	for _, s := range d.Starts {
		startsNow[s.JobID] = true
	}
	promised := e.promisedForecasts(now)
	run := func() forecastDone {
		began := time.Now()
		r := fc.f.Forecast(in)
		r.Jobs = withPromised(r.Jobs, promised)
		took := time.Since(began)
		out := forecastDone{madeAt: now, res: r, startsNow: startsNow}
		fc.publish(out, took)
		return out
	}
	fc.inFlight = true
	if fc.cfg.Sync {
		r := run()
		fc.inFlight = false
		fc.lastCost = fc.info.Took
		e.recordForecast(ctx, r, jobs)
		return
	}
	go func() { fc.done <- run() }()
}

// promisedForecasts forecasts the jobs promised GPUs that the jobs they
// preempted still hold (sched.Promises): the snapshot shows each running
// there (Promises.Present), so the forecaster gives it none, and without
// these its forecast flipped to "not forecast yet" for the victims' whole
// handover. A promised job starts once the last of its victims has
// exited: by its stop request plus the grace period at the latest (its
// machine kills it then; Config.HandoverS of the scheduler, serve's
// --grace), likely as long after the request as stopped runs have taken
// to exit on average so far (Stats.ReleaseSeconds), the latest before
// any has. None without a grace period to bound it.
func (e *Engine) promisedForecasts(now time.Time) []forecast.Forecast {
	if len(e.promised) == 0 {
		return nil
	}
	exits := e.exitTimes()
	at := seconds(now)
	var out []forecast.Forecast
	for _, id := range slices.Sorted(maps.Keys(e.promised)) {
		var asked time.Time
		for _, v := range e.promised[id].Victims {
			if r := e.runs[v]; r != nil && r.stopAsked.After(asked) {
				asked = r.stopAsked
			}
		}
		if asked.IsZero() {
			continue // its victims have left: it starts at the next pass
		}
		if likely, latest, ok := exits.of(asked, at); ok {
			out = append(out, forecast.Forecast{JobID: id, State: forecast.StateExpected, Earliest: at, Likely: likely, Latest: latest})
		}
	}
	return out
}

// exitTimes is how long runs asked to stop take to exit: the grace period
// (Config.HandoverS of the scheduler, serve's --grace), and the mean of
// the time they took so far (Stats.ReleaseSeconds over Releases).
type exitTimes struct {
	grace, mean float64 // seconds; mean 0: none has exited yet
}

func (e *Engine) exitTimes() exitTimes {
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	x := exitTimes{grace: e.cfg.Scheduler.Config().HandoverS}
	if n := e.stats.s.Releases; n > 0 {
		x.mean = e.stats.s.ReleaseSeconds / float64(n)
	}
	return x
}

// expected is how long a run asked to stop is expected to take to exit:
// the mean so far, the grace period before any has exited.
func (x exitTimes) expected() float64 {
	if x.mean > 0 {
		return min(x.mean, x.grace)
	}
	return x.grace
}

// of is when a run asked to stop at asked is likely to have exited, and
// by when at the latest (its machine kills it then), in seconds, neither
// before at: the mean time runs took after the request, the latest before
// any has exited. ok is false without a grace period to bound it.
func (x exitTimes) of(asked time.Time, at float64) (likely, latest float64, ok bool) {
	if !(x.grace > 0) {
		return 0, 0, false
	}
	latest = max(seconds(asked)+x.grace, at)
	likely = latest
	if x.mean > 0 {
		likely = min(max(seconds(asked)+x.mean, at), latest)
	}
	return likely, latest, true
}

// withPromised puts the promised jobs' forecasts in fs, in place of the
// forecaster's own for a job promised in this very pass (the snapshot
// showed it waiting).
func withPromised(fs, promised []forecast.Forecast) []forecast.Forecast {
	for _, p := range promised {
		if i := slices.IndexFunc(fs, func(f forecast.Forecast) bool { return f.JobID == p.JobID }); i >= 0 {
			fs[i] = p
		} else {
			fs = append(fs, p)
		}
	}
	return fs
}

// publish makes r the forecast every reader sees.
func (fc *forecasts) publish(r forecastDone, took time.Duration) {
	jobs := make(map[int64]JobForecast, len(r.res.Jobs))
	for _, f := range r.res.Jobs {
		jobs[f.JobID] = JobForecast{State: f.State, Reason: f.Reason, MadeAt: r.madeAt,
			Earliest: wallTime(r.madeAt, r.res.Now, f.Earliest), Likely: wallTime(r.madeAt, r.res.Now, f.Likely),
			Latest: wallTime(r.madeAt, r.res.Now, f.Latest)}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.jobs = jobs
	made := fc.info.Made
	if r.res.Now != 0 {
		made++
	}
	fc.info = ForecastInfo{MadeAt: r.madeAt, Took: took, Passes: r.res.Passes, Visits: r.res.Visits, Jobs: len(r.res.Jobs),
		Truncated: r.res.Truncated, History: r.res.History, ArrivalsPerHour: r.res.ArrivalsPerS * 3600,
		Samples: fc.info.Samples, Range: fc.info.Range, Made: made}
}

// wallTime is the time at seconds s on a snapshot's clock whose now,
// snapNow, was at; zero for none.
func wallTime(at time.Time, snapNow, s float64) time.Time {
	if s == 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return time.Time{}
	}
	return at.Add(time.Duration((s - snapNow) * float64(time.Second))).Round(time.Millisecond)
}

// loadForecastInputs rereads the run times of finished jobs when jobs
// have finished since (at most every 5 s, and at least every minute), and
// the recent submissions every 30 s.
func (e *Engine) loadForecastInputs(ctx context.Context, now time.Time, sig uint64) {
	fc := e.fc
	age := now.Sub(fc.histAt)
	if fc.hist == nil || age >= time.Minute || ((e.completed || sig != fc.histSig) && age >= 5*time.Second) {
		samples, err := e.cfg.Store.FinishedRunTimes(ctx, fc.cfg.HistoryLimit)
		if err != nil {
			e.cfg.Logger.Warn("forecast: read run times", "err", err)
		} else {
			fc.hist, fc.histAt, fc.histSig, e.completed = forecast.NewHistory(samples, 0), now, sig, false
		}
	}
	if fc.arrAt.IsZero() || now.Sub(fc.arrAt) >= 30*time.Second {
		js, err := e.cfg.Store.RecentSubmissions(ctx, now.Add(-fc.cfg.ArrivalWindow), fc.cfg.ArrivalLimit)
		if err != nil {
			e.cfg.Logger.Warn("forecast: read recent submissions", "err", err)
			return
		}
		fc.arr, fc.arrAt = expectedArrivals(js, now, fc.cfg.ArrivalRateWindow, e), now
	}
}

// expectedArrivals expects jobs like js (newest first) at the rate of
// those submitted in the last window (arrivalRate). Fewer than 5 say too
// little: none are expected then, nor when none came in the window.
func expectedArrivals(js []Job, now time.Time, window time.Duration, e *Engine) *forecast.Arrivals {
	if len(js) < 5 {
		return nil
	}
	at := make([]time.Time, len(js))
	for i, j := range js {
		at[i] = j.SubmittedAt
	}
	rate := arrivalRate(at, now, window)
	if !(rate > 0) {
		return nil
	}
	a := &forecast.Arrivals{RatePerS: rate}
	gpuMiB := e.smallestGPU()
	for _, j := range js {
		sj := e.schedJob(&Job{ID: j.ID, Team: j.Team, User: j.User, GPUs: j.GPUs, GPUMemMiB: j.GPUMemMiB, Model: j.Model,
			Sharing: j.Sharing, GPUFraction: j.GPUFraction, Memory: j.Memory, BatchSize: j.BatchSize, CPUProfile: j.CPUProfile,
			Command: j.Command, SubmittedAt: j.SubmittedAt, TimeLimit: j.TimeLimit}, now, gpuMiB)
		a.Like = append(a.Like, sj)
	}
	return a
}

// arrivalRate is the rate (per second) of the submissions at (newest
// first) that came in the last window before now: as many as they are
// over the window, or over the time since the oldest of all when that is
// shorter (a cluster younger than the window). Only the window counts,
// so that an opening burst does not hold the rate up long after it: the
// time since the oldest submission, which the rate was once taken over,
// kept a burst of 50 in 10 s at 6 a minute ten minutes later, when one a
// minute came.
func arrivalRate(at []time.Time, now time.Time, window time.Duration) float64 {
	if len(at) == 0 {
		return 0
	}
	span := now.Sub(at[len(at)-1])
	if span > window {
		span = window
	}
	if span <= 0 {
		return 0
	}
	from, n := now.Add(-span), 0
	for _, t := range at {
		if !t.Before(from) {
			n++
		}
	}
	return float64(n) / span.Seconds()
}

// recordForecast keeps a job's first forecast and one per checkpoint of
// its wait, for the jobs still waiting that the forecast's own pass did
// not start. The first is the first shown, unknown or not: the track
// record the pages show is of what people were told (an unknown one
// counts as a forecast that held no start, forecast.Calibration.Unknown).
func (e *Engine) recordForecast(ctx context.Context, r forecastDone, jobs []Job) {
	fc := e.fc
	if r.res.Now == 0 {
		return
	}
	submitted := make(map[int64]time.Time, len(jobs))
	for i := range jobs {
		submitted[jobs[i].ID] = jobs[i].SubmittedAt
	}
	for id := range fc.recorded {
		if _, ok := submitted[id]; !ok {
			delete(fc.recorded, id) // finished
		}
	}
	var rs []ForecastRecord
	for _, f := range r.res.Jobs {
		sub, ok := submitted[f.JobID]
		if !ok || r.startsNow[f.JobID] {
			continue // gone, or started by the pass itself
		}
		had := fc.recorded[f.JobID]
		kind, bit := "", uint8(0)
		if had&1 == 0 {
			kind, bit = "first", 1
		} else {
			age := r.madeAt.Sub(sub)
			for i := len(ForecastCheckpoints) - 1; i >= 0; i-- {
				if age >= ForecastCheckpoints[i].Age {
					if b := uint8(2) << i; had&b == 0 {
						kind, bit = ForecastCheckpoints[i].Kind, b
					}
					break
				}
			}
		}
		if kind == "" {
			continue
		}
		rec := ForecastRecord{JobID: f.JobID, Kind: kind, MadeAt: r.madeAt, State: f.State, Reason: f.Reason,
			Earliest: timePtr(wallTime(r.madeAt, r.res.Now, f.Earliest)), Likely: timePtr(wallTime(r.madeAt, r.res.Now, f.Likely)),
			Latest: timePtr(wallTime(r.madeAt, r.res.Now, f.Latest))}
		rs = append(rs, rec)
		fc.recorded[f.JobID] = had | bit
	}
	if err := e.cfg.Store.RecordForecasts(ctx, rs); err != nil {
		e.cfg.Logger.Warn("forecast: record", "err", err)
		for _, rec := range rs {
			delete(fc.recorded, rec.JobID) // tried again with the next forecast
		}
	}
	e.storeLatestForecasts(ctx, r, submitted)
}

// storeLatestForecasts stores the forecasts of r that changed since they
// were last stored, for the jobs still waiting that r's pass did not
// start (submitted holds the unfinished jobs).
func (e *Engine) storeLatestForecasts(ctx context.Context, r forecastDone, submitted map[int64]time.Time) {
	fc := e.fc
	if fc.stored == nil {
		fc.stored = map[int64]JobForecast{}
	}
	for id := range fc.stored {
		if _, ok := submitted[id]; !ok {
			delete(fc.stored, id) // finished
		}
	}
	var rs []ForecastRecord
	for _, f := range r.res.Jobs {
		if _, ok := submitted[f.JobID]; !ok || r.startsNow[f.JobID] {
			continue
		}
		jf := JobForecast{State: f.State, Reason: f.Reason,
			Earliest: wallTime(r.madeAt, r.res.Now, f.Earliest), Likely: wallTime(r.madeAt, r.res.Now, f.Likely),
			Latest: wallTime(r.madeAt, r.res.Now, f.Latest)}
		if old, ok := fc.stored[f.JobID]; ok && old == jf {
			continue
		}
		fc.stored[f.JobID] = jf
		rs = append(rs, ForecastRecord{JobID: f.JobID, MadeAt: r.madeAt, State: f.State, Reason: f.Reason,
			Earliest: timePtr(jf.Earliest), Likely: timePtr(jf.Likely), Latest: timePtr(jf.Latest)})
	}
	if len(rs) == 0 {
		return
	}
	if err := e.cfg.Store.SetLatestForecasts(ctx, rs); err != nil {
		e.cfg.Logger.Warn("forecast: store latest", "err", err)
		for _, rec := range rs {
			delete(fc.stored, rec.JobID) // stored again with the next forecast
		}
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// jobsSignature sums up the unfinished jobs and their states, so that a
// change is seen; it also counts the waiting ones.
func jobsSignature(jobs []Job) (uint64, int) {
	h := fnv.New64a()
	var b [9]byte
	waiting := 0
	for k := range jobs {
		j := &jobs[k]
		for i := range 8 {
			b[i] = byte(j.ID >> (8 * i))
		}
		b[8] = 0
		if j.State.Waiting() {
			b[8] = 1
			waiting++
		}
		h.Write(b[:])
	}
	return h.Sum64(), waiting
}

// Forecasts returns every waiting job's forecast from the latest
// forecast, by job ID. The map is never changed once published: a new
// forecast replaces it whole, so a caller may read it as one moment.
func (e *Engine) Forecasts() map[int64]JobForecast {
	e.fc.mu.Lock()
	defer e.fc.mu.Unlock()
	return e.fc.jobs
}

// PassInterval is the longest time between two scheduling passes: how
// finely the engine times starts.
func (e *Engine) PassInterval() time.Duration { return e.cfg.Interval }
