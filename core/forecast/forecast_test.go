package forecast

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
)

// nodes returns n nodes of g GPUs each, named n0, n1, ...
func nodes(n, g int) []sched.Node {
	out := make([]sched.Node, n)
	for i := range out {
		out[i].Name = "n" + itoa(i)
		for k := range g {
			out[i].GPUs = append(out[i].GPUs, sched.GPU{Index: k, MemMiB: 81920})
		}
	}
	return out
}

// running is a job that has run ran seconds on the first gpus GPUs of n0.
func running(id int64, gpus int, ran, now float64) sched.Job {
	j := sched.Job{ID: id, User: "u", Team: "t", GPUs: gpus, State: sched.Running, SubmitTime: now - ran - 1,
		LastStartTime: now - ran, ExecutedS: ran, AttainedService: ran * float64(gpus), Model: "resnet50"}
	for k := range gpus {
		j.Placement = append(j.Placement, gpu.Ref{Node: "n0", Index: k})
	}
	return j
}

func waiting(id int64, gpus int, submit float64) sched.Job {
	return sched.Job{ID: id, User: "u", Team: "t", GPUs: gpus, SubmitTime: submit, Model: "resnet50"}
}

// runTimes is a history of n jobs, each ran s seconds.
func runTimes(s ...float64) *History {
	out := make([]Sample, len(s))
	for i, v := range s {
		out[i] = Sample{User: "someone", Team: "other", Model: "vgg16", RunS: v}
	}
	return NewHistory(out, 0)
}

// newForecaster returns a forecaster without drift: run times are drawn
// from the history as it is.
func newForecaster(t *testing.T, policy string) *Forecaster {
	t.Helper()
	f, err := New(Config{Sched: sched.Config{Policy: policy}, Drift: -1})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const now = 10_000.0

func TestForecast(t *testing.T) {
	spread := runTimes(50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150) // every 10 s from 50 to 150
	tests := []struct {
		name   string
		policy string
		nodes  []sched.Node
		jobs   []sched.Job
		teams  []sched.Team
		later  []Arrival
		h      *History
		id     int64
		want   Forecast
		reason string // a part of the reason
		// between, when set, bounds Earliest and Latest instead of want's
		// exact times: [min Earliest, max Latest], with the likely start
		// strictly inside the range.
		between [2]float64
	}{
		{
			name: "behind one running job of known remaining time: starts when it ends", policy: "fifo",
			nodes: nodes(1, 2), jobs: []sched.Job{running(1, 2, 40, now), waiting(2, 2, now-5)},
			h: runTimes(100, 100, 100), id: 2,
			want: Forecast{JobID: 2, State: StateExpected, Earliest: now + 60, Likely: now + 60, Latest: now + 60},
		},
		{
			name: "behind one running job of uncertain remaining time: the range of its end", policy: "fifo",
			nodes: nodes(1, 2), jobs: []sched.Job{running(1, 2, 40, now), waiting(2, 2, now-5)},
			h: spread, id: 2,
			// It runs 50 to 150 s in all, 40 of which are done.
			want: Forecast{JobID: 2, State: StateExpected}, between: [2]float64{now + 10, now + 110},
		},
		{
			name: "the run so far conditions the rest: a job past most run times ends soon", policy: "fifo",
			nodes: nodes(1, 2), jobs: []sched.Job{running(1, 2, 125, now), waiting(2, 2, now-5)},
			h: spread, id: 2,
			// Of the jobs that ran past 125 s, 130, 140 and 150.
			want: Forecast{JobID: 2, State: StateExpected}, between: [2]float64{now + 5, now + 25},
		},
		{
			name: "second in line waits for the first to run too", policy: "fifo",
			nodes: nodes(1, 2), jobs: []sched.Job{running(1, 2, 40, now), waiting(2, 2, now-5), waiting(3, 2, now-4)},
			h: runTimes(100, 100, 100), id: 3,
			want: Forecast{JobID: 3, State: StateExpected, Earliest: now + 160, Likely: now + 160, Latest: now + 160},
		},
		{
			name: "a job that fits now starts now", policy: "fifo",
			nodes: nodes(1, 4), jobs: []sched.Job{running(1, 2, 40, now), waiting(2, 2, now-5)},
			h: runTimes(100, 100, 100), id: 2,
			want: Forecast{JobID: 2, State: StateExpected, Earliest: now, Likely: now, Latest: now},
		},
		{
			name: "cap forbids: never, naming the cap", policy: "fifo",
			nodes: nodes(1, 8), jobs: []sched.Job{waiting(2, 4, now-5)},
			teams: []sched.Team{{Name: "t", MaxGPUsPerUser: 2}},
			h:     runTimes(100, 100, 100), id: 2,
			want:   Forecast{JobID: 2, State: StateNever, Cause: sched.WaitUserCap},
			reason: "cannot start while the cap of user u in team t is 2 GPUs: it needs 4",
		},
		{
			name: "a user's own cap overrides the team's", policy: "fifo",
			nodes: nodes(1, 8), jobs: []sched.Job{waiting(2, 2, now-5)},
			teams: []sched.Team{{Name: "t", MaxGPUsPerUser: 4, UserCaps: map[string]int{"u": 1}}},
			h:     runTimes(100, 100, 100), id: 2,
			want:   Forecast{JobID: 2, State: StateNever, Cause: sched.WaitUserCap},
			reason: "is 1 GPU: it needs 2",
		},
		{
			name: "cap reached by the user's own running job: starts when that one ends", policy: "fifo",
			nodes: nodes(1, 8), jobs: []sched.Job{running(1, 2, 40, now), waiting(2, 2, now-5)},
			teams: []sched.Team{{Name: "t", MaxGPUsPerUser: 2}},
			h:     runTimes(100, 100, 100), id: 2,
			want: Forecast{JobID: 2, State: StateExpected, Earliest: now + 60, Likely: now + 60, Latest: now + 60},
		},
		{
			name: "too large for the cluster: never", policy: "tiresias-l",
			nodes: nodes(2, 4), jobs: []sched.Job{waiting(2, 16, now-5)},
			h: runTimes(100, 100, 100), id: 2,
			want:   Forecast{JobID: 2, State: StateNever, Cause: sched.WaitTooLarge},
			reason: "needs 16 GPUs; the schedulable nodes have 8 in all",
		},
		{
			name: "no history: unknown, saying why", policy: "fifo",
			nodes: nodes(1, 2), jobs: []sched.Job{running(1, 2, 40, now), waiting(2, 2, now-5)},
			h: runTimes(100), id: 2,
			want:   Forecast{JobID: 2, State: StateUnknown},
			reason: "1 of the 3 finished jobs",
		},
		{
			name: "no finished job, every job limited: from the limits alone", policy: "fifo",
			nodes: nodes(1, 2), jobs: []sched.Job{limited(running(1, 2, 40, now), 140), limited(waiting(2, 2, now-5), 60)},
			h: runTimes(), id: 2,
			// The holder ends within the 100 s left of its limit.
			want: Forecast{JobID: 2, State: StateExpected}, between: [2]float64{now, now + 100},
		},
		{
			name: "no finished job, a running job without a limit: unknown", policy: "fifo",
			nodes: nodes(1, 2), jobs: []sched.Job{running(1, 2, 40, now), limited(waiting(2, 2, now-5), 60)},
			h: runTimes(), id: 2,
			want:   Forecast{JobID: 2, State: StateUnknown},
			reason: "0 of the 3 finished jobs",
		},
		{
			name: "no finished job, a retry without a limit: unknown", policy: "fifo",
			nodes: nodes(1, 2), jobs: []sched.Job{limited(running(1, 2, 40, now), 140), limited(waiting(2, 2, now-5), 60)},
			later: []Arrival{{Job: waiting(3, 2, now-50), At: now + 30}},
			h:     runTimes(), id: 2,
			want:   Forecast{JobID: 2, State: StateUnknown},
			reason: "0 of the 3 finished jobs",
		},
		{
			name: "waiting out a retry backoff: not before it ends", policy: "fifo",
			nodes: nodes(1, 2), later: []Arrival{{Job: waiting(2, 2, now-50), At: now + 30}},
			h: runTimes(100, 100, 100), id: 2,
			want: Forecast{JobID: 2, State: StateExpected, Earliest: now + 30, Likely: now + 30, Latest: now + 30},
		},
		{
			name: "a later arrival too large for the cluster: never, once nothing is left to happen", policy: "fifo",
			nodes: nodes(1, 2), later: []Arrival{{Job: waiting(2, 4, now-50), At: now + 30}},
			h: runTimes(100, 100, 100), id: 2,
			want:   Forecast{JobID: 2, State: StateNever, Cause: sched.WaitTooLarge},
			reason: "even once every other job has finished",
		},
		{
			name: "a running job older than every finished one runs on in proportion to its age", policy: "fifo",
			nodes: nodes(1, 2), jobs: []sched.Job{running(1, 2, 1000, now), waiting(2, 2, now-5)},
			h: runTimes(100, 100, 100), id: 2,
			// 1000 x q/(1-q) for q drawn in (0, 1): 1000 s at the median.
			want: Forecast{JobID: 2, State: StateExpected}, between: [2]float64{now, now + 99000},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newForecaster(t, tc.policy)
			r := f.Forecast(Input{Snapshot: sched.Snapshot{Now: now, Nodes: tc.nodes, Jobs: tc.jobs, Teams: tc.teams}, Later: tc.later, History: tc.h})
			got, ok := r.Job(tc.id)
			if !ok {
				t.Fatalf("no forecast for job %d in %+v", tc.id, r.Jobs)
			}
			if !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", got.Reason, tc.reason)
			}
			got.Reason = ""
			if tc.between != [2]float64{} {
				if got.State != tc.want.State || got.Earliest < tc.between[0] || got.Latest > tc.between[1] ||
					!(got.Earliest < got.Likely && got.Likely < got.Latest) {
					t.Errorf("forecast %+v, want %s between %v with the likely start inside", got, tc.want.State, tc.between)
				}
				return
			}
			if !near(got, tc.want) {
				t.Errorf("forecast %+v\nwant     %+v", got, tc.want)
			}
		})
	}
}

// limited is j with a time limit of l seconds.
func limited(j sched.Job, l float64) sched.Job {
	j.TimeLimitS = l
	return j
}

// TestForecastFromLimitsAlone: before any job has finished, a cluster
// whose jobs all declared limits gets forecasts, and says what they are
// from; the likely end of a job is halfway through what is left of its
// limit, its range the whole of it.
func TestForecastFromLimitsAlone(t *testing.T) {
	f := newForecaster(t, "fifo")
	in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 2),
		Jobs: []sched.Job{limited(running(1, 2, 40, now), 440), limited(waiting(2, 2, now-5), 60)}}, History: runTimes()}
	r := f.Forecast(in)
	if want := "the time limits alone (no finished job yet)"; r.History != want {
		t.Errorf("history %q, want %q", r.History, want)
	}
	got, _ := r.Job(2)
	// 400 s left of the holder's limit: likely 200 s, the range most of
	// the 400.
	if got.State != StateExpected || math.Abs(got.Likely-(now+200)) > 40 || got.Earliest > now+80 || got.Latest < now+320 || got.Latest > now+400 {
		t.Errorf("forecast %+v: want likely about 200 s from now, within 0 to 400 s", got)
	}
	// Once 3 jobs have finished, their run times speak instead.
	in.History = runTimes(100, 100, 100)
	r = f.Forecast(in)
	if got, _ := r.Job(2); got.State != StateExpected || math.Abs(got.Likely-(now+60)) > 1e-6 {
		t.Errorf("forecast with a history %+v: want 60 s from now, as the run times say", got)
	}
}

func near(a, b Forecast) bool {
	const eps = 1e-6
	return a.JobID == b.JobID && a.State == b.State && a.Cause == b.Cause &&
		math.Abs(a.Earliest-b.Earliest) < eps && math.Abs(a.Likely-b.Likely) < eps && math.Abs(a.Latest-b.Latest) < eps
}

// Drift widens the range around what the history says, in proportion: a
// job behind one that has 60 s left by every finished job.
func TestForecastDrift(t *testing.T) {
	f, err := New(Config{Sched: sched.Config{Policy: "fifo"}})
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 2), Jobs: []sched.Job{running(1, 2, 40, now), waiting(2, 2, now-5)}},
		History: runTimes(100, 100, 100)}
	got, _ := f.Forecast(in).Job(2)
	// Its 60 s scaled by e^(0.3 z), z the normal quantiles of the 10
	// samples: about 0.61, 0.73, ..., 1.37, 1.64. The range's bounds are
	// the predictive 10th and 90th percentiles, the order statistics at
	// 1.1 and 9.9 of 10: about 37 s and 97 s.
	if got.State != StateExpected || !(got.Earliest > now+35 && got.Earliest < now+40) || !(got.Latest > now+94 && got.Latest < now+99) ||
		math.Abs(got.Likely-(now+60)) > 1 {
		t.Errorf("forecast %+v: want about 60 s from now, between about 37 and 97", got)
	}
}

// A preemptive policy: a running job demoted past a queue threshold gives
// way to a waiting one of the top queue, and the forecast sees it.
func TestForecastSeesPreemption(t *testing.T) {
	f, err := New(Config{Sched: sched.Config{Policy: "tiresias-l", Thresholds: []float64{100}}, Drift: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Job 1 holds both GPUs, has attained 2 x 30 = 60 GPU-s of the 100 of
	// queue 0: it is demoted 20 s from now, and job 2 then takes its GPUs.
	in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 2), Jobs: []sched.Job{running(1, 2, 30, now), waiting(2, 2, now-5)}},
		History: runTimes(1000, 1000, 1000)}
	got, _ := f.Forecast(in).Job(2)
	want := Forecast{JobID: 2, State: StateExpected, Earliest: now + 20, Likely: now + 20, Latest: now + 20}
	if !near(got, want) {
		t.Errorf("forecast %+v, want %+v", got, want)
	}
}

func TestForecastIsDeterministic(t *testing.T) {
	in := bigInput(300, 40, 4)
	// Low queue thresholds: jobs are demoted, preempted and resumed.
	cfg := Config{Sched: sched.Config{Policy: "tiresias-l", Thresholds: []float64{500, 2000}}}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := f.Forecast(in)
	b := f.Forecast(in)
	c := g.Forecast(in)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, c) {
		t.Fatal("the same input gave different forecasts")
	}
	expected := 0
	for _, fc := range a.Jobs {
		// Only a budget or a horizon leaves a job's start beyond reach;
		// jobs preempted and resumed meanwhile are no waiting job's start.
		if (fc.State == StateLater || (fc.State == StateExpected && fc.Latest == 0)) && !a.Truncated {
			t.Fatalf("job %d: %+v, though the forecast was not truncated and expected no arrival", fc.JobID, fc)
		}
		if fc.State == StateExpected {
			expected++
			if fc.Earliest < now || (fc.Latest != 0 && fc.Latest < fc.Earliest) || (fc.Likely != 0 && (fc.Likely < fc.Earliest || (fc.Latest != 0 && fc.Likely > fc.Latest))) {
				t.Fatalf("forecast out of order: %+v", fc)
			}
		}
	}
	if expected == 0 {
		t.Fatalf("no job expected to start: %+v", a.Jobs[:5])
	}
}

func TestForecastBudget(t *testing.T) {
	in := bigInput(400, 16, 2)
	f, err := New(Config{Sched: sched.Config{Policy: "fifo"}, Budget: 20000})
	if err != nil {
		t.Fatal(err)
	}
	r := f.Forecast(in)
	if !r.Truncated {
		t.Fatal("a small budget did not truncate the forecast")
	}
	last := r.Jobs[len(r.Jobs)-1]
	if last.State != StateLater || !(last.Earliest > now) || last.Reason == "" {
		t.Errorf("the last job's forecast: %+v; want later, not before where the forecast stopped", last)
	}
	// The budget, plus the first, explained pass.
	if r.Visits > 20000+len(in.Snapshot.Jobs) {
		t.Errorf("visited %d jobs, over the budget", r.Visits)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown policy", Config{Sched: sched.Config{Policy: "nope"}}, "unknown policy"},
		{"range out of order", Config{Sched: sched.Config{Policy: "fifo"}, Range: [2]float64{0.9, 0.1}}, "range"},
		{"range beyond 1", Config{Sched: sched.Config{Policy: "fifo"}, Range: [2]float64{0.1, 1.5}}, "range"},
		{"negative samples", Config{Sched: sched.Config{Policy: "fifo"}, Samples: -1}, "samples"},
		{"negative budget", Config{Sched: sched.Config{Policy: "fifo"}, Budget: -1}, "budget"},
		{"negative window", Config{Sched: sched.Config{Policy: "fifo"}, Window: -1}, "window"},
		{"NaN horizon", Config{Sched: sched.Config{Policy: "fifo"}, HorizonS: math.NaN()}, "horizon"},
		{"negative max load", Config{Sched: sched.Config{Policy: "fifo"}, MaxLoad: -1}, "max load"},
		{"NaN max load", Config{Sched: sched.Config{Policy: "fifo"}, MaxLoad: math.NaN()}, "max load"},
		{"infinite max load", Config{Sched: sched.Config{Policy: "fifo"}, MaxLoad: math.Inf(1)}, "max load"},
	}
	for _, tc := range tests {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

func TestCheckMaxLoad(t *testing.T) {
	for _, tc := range []struct {
		m  float64
		ok bool
	}{
		{DefaultMaxLoad, true}, {0.5, true}, {2, true}, {1e6, true},
		{0, false}, {-1, false}, {math.NaN(), false}, {math.Inf(1), false}, {math.Inf(-1), false},
	} {
		err := CheckMaxLoad(tc.m)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "max load")) {
			t.Errorf("CheckMaxLoad(%v) = %v, want ok %v", tc.m, err, tc.ok)
		}
	}
	// 0 in a Config is the default, not a bound of nothing.
	f, err := New(Config{Sched: sched.Config{Policy: "fifo"}})
	if err != nil || f.Config().MaxLoad != DefaultMaxLoad {
		t.Errorf("MaxLoad 0: %v, %v; want the default %v", f, err, DefaultMaxLoad)
	}
}

func TestRemaining(t *testing.T) {
	var samples []Sample
	for i := range 10 {
		samples = append(samples, Sample{User: "alice", Team: "vision", Model: "resnet50", RunS: 1000 + float64(i)})
		samples = append(samples, Sample{User: "bob", Team: "nlp", Model: "bert", RunS: 10 + float64(i)})
	}
	h := NewHistory(append(samples, Sample{RunS: -1}, Sample{RunS: math.Inf(1)}), 5)
	tests := []struct {
		name string
		job  sched.Job
		q    float64
		want float64
	}{
		{"the user's jobs of the model", sched.Job{User: "alice", Team: "vision", Model: "resnet50"}, 0.5, 1004.5},
		{"the user's jobs, another model", sched.Job{User: "bob", Team: "nlp", Model: "gpt2"}, 0.5, 14.5},
		{"the model's jobs, a new user", sched.Job{User: "carol", Team: "x", Model: "bert"}, 0, 10},
		{"the team's jobs", sched.Job{User: "dave", Team: "vision"}, 1, 1009},
		{"everyone's jobs", sched.Job{User: "erin", Team: "y"}, 0.5, (19 + 1000) / 2.0},
		{"conditioned on the run so far", sched.Job{User: "bob", Model: "bert", ExecutedS: 14.5}, 0.5, 17 - 14.5},
		{"past the group, the broader one", sched.Job{User: "bob", Model: "bert", ExecutedS: 100}, 0.5, 1004.5 - 100},
		// The 5 longest (1005 to 1009 s) over the next (1004 s): a tail so
		// light that its index is the largest allowed, 10.
		{"past everyone, in proportion to its age", sched.Job{User: "bob", Model: "bert", ExecutedS: 5000}, 0.5, 5000 * (math.Pow(0.5, -0.1) - 1)},
	}
	for _, tc := range tests {
		got, ok := h.Remaining(&tc.job, tc.q)
		if !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Remaining = %v, %v; want %v", tc.name, got, ok, tc.want)
		}
	}
	if h.Len() != 20 || h.TailIndex() != 10 {
		t.Errorf("Len = %d, tail index %v; want 20 (bad samples left out), 10", h.Len(), h.TailIndex())
	}
	if a := runTimes(100, 200).TailIndex(); a != 2 {
		t.Errorf("tail index of 2 run times %v, want the default 2", a)
	}
	// A Pareto sample of index 1.5: x = u^(-1/1.5).
	var pareto []Sample
	for i := range 1000 {
		pareto = append(pareto, Sample{RunS: math.Pow((float64(i)+0.5)/1000, -1/1.5)})
	}
	if a := NewHistory(pareto, 0).TailIndex(); math.Abs(a-1.5) > 0.2 {
		t.Errorf("tail index of a Pareto(1.5) sample %v, want about 1.5", a)
	}
	if _, ok := NewHistory(nil, 0).Remaining(&sched.Job{}, 0.5); ok {
		t.Error("an empty history knows a run time")
	}
}

// TestRemainingTimeLimit: a job with a time limit runs the share of it
// that jobs with limits ran. Ten jobs used 40% to 58% of limits of 100 to
// 1,000 s; ten without limits ran 5,000 s.
func TestRemainingTimeLimit(t *testing.T) {
	var samples []Sample
	for i := range 10 {
		limit := 100 * float64(i+1)
		samples = append(samples, Sample{RunS: limit * (0.4 + 0.02*float64(i)), LimitS: limit}, Sample{RunS: 5000})
	}
	h := NewHistory(samples, 0)
	tests := []struct {
		name string
		job  sched.Job
		q    float64
		want float64
	}{
		{"a limit: the median share of it", sched.Job{TimeLimitS: 2000}, 0.5, 2000 * 0.49},
		{"a limit: the least share", sched.Job{TimeLimitS: 2000}, 0, 2000 * 0.4},
		{"a limit, the share so far counted", sched.Job{TimeLimitS: 2000, ExecutedS: 2000 * 0.41}, 0, 2000 * (0.42 - 0.41)},
		{"past the share of all but 3: theirs", sched.Job{TimeLimitS: 2000, ExecutedS: 2000 * 0.53}, 1, 2000 * (0.58 - 0.53)},
		{"past the share of all but 2: the run times", sched.Job{TimeLimitS: 2000, ExecutedS: 2000 * 0.55}, 1, 5000 - 2000*0.55},
		{"no limit: the run times", sched.Job{}, 1, 5000},
	}
	for _, tc := range tests {
		got, ok := h.Remaining(&tc.job, tc.q)
		if !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Remaining = %v, %v; want %v", tc.name, got, ok, tc.want)
		}
	}
}

// TestRemainingFirstLimits: a cluster's first jobs to finish are its
// short ones. Three jobs of 20 to 40 s finished, each within a limit of
// one or two minutes; a job with a limit of 10 minutes is drawn from the
// shares of their limits they used, not from their run times.
func TestRemainingFirstLimits(t *testing.T) {
	h := NewHistory([]Sample{{RunS: 20, LimitS: 60}, {RunS: 30, LimitS: 60}, {RunS: 40, LimitS: 120}}, 0)
	tests := []struct {
		name string
		job  sched.Job
		q    float64
		want float64
	}{
		{"the median share", sched.Job{TimeLimitS: 600}, 0.5, 600 * 1 / 3.0},
		{"the largest share", sched.Job{TimeLimitS: 600}, 1, 600 * 0.5},
		{"no limit: their run times", sched.Job{}, 0.5, 30},
		{"past two of the shares: the run times' tail", sched.Job{TimeLimitS: 600, ExecutedS: 300}, 0.5, 300 * (math.Pow(0.5, -1/defaultAlpha) - 1)},
	}
	for _, tc := range tests {
		got, ok := h.Remaining(&tc.job, tc.q)
		if !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Remaining = %v, %v; want %v", tc.name, got, ok, tc.want)
		}
	}
}

// bigInput is a cluster of nodes x gpus GPUs, all held, with n jobs
// waiting for 1, 2, 4 or 8 of them and a history of varied run times.
func bigInput(n, nodeCount, gpus int) Input {
	s := sched.Snapshot{Now: now, Nodes: nodes(0, 0)}
	for i := range nodeCount {
		node := sched.Node{Name: "node" + itoa(i)}
		for k := range gpus {
			node.GPUs = append(node.GPUs, sched.GPU{Index: k, MemMiB: 81920})
		}
		s.Nodes = append(s.Nodes, node)
		// One running job per node holds all its GPUs.
		id := int64(1_000_000 + i)
		j := sched.Job{ID: id, User: "u" + itoa(i%5), Team: "t", GPUs: gpus, State: sched.Running,
			SubmitTime: now - 500, LastStartTime: now - float64(50+i*13%400), Model: "resnet50"}
		j.ExecutedS = now - j.LastStartTime
		j.AttainedService = j.ExecutedS * float64(gpus)
		for k := range gpus {
			j.Placement = append(j.Placement, gpu.Ref{Node: node.Name, Index: k})
		}
		s.Jobs = append(s.Jobs, j)
	}
	sizes := []int{1, 1, 2, 4, 8}
	for i := range n {
		g := min(sizes[i%len(sizes)], gpus)
		s.Jobs = append(s.Jobs, sched.Job{ID: int64(i + 1), User: "u" + itoa(i%7), Team: "t", GPUs: g,
			SubmitTime: now - float64(n-i), Model: []string{"resnet50", "vgg16", "bert"}[i%3]})
	}
	var hist []Sample
	for i := range 500 {
		hist = append(hist, Sample{User: "u" + itoa(i%7), Team: "t", Model: []string{"resnet50", "vgg16", "bert"}[i%3],
			RunS: 30 + math.Exp(float64(i%97)/97*6)})
	}
	return Input{Snapshot: s, History: NewHistory(hist, 0)}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Expected arrivals compete with the waiting jobs: under skip-ahead, small
// jobs submitted later take the GPUs a large waiting job needs.
func TestForecastExpectsArrivals(t *testing.T) {
	f, err := New(Config{Sched: sched.Config{Policy: "fjf"}, Drift: -1, MaxLoad: 10})
	if err != nil {
		t.Fatal(err)
	}
	run := running(1, 1, 40, now)
	in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 2), Jobs: []sched.Job{run, waiting(2, 2, now-5)}},
		History: runTimes(100, 100, 100)}
	without, _ := f.Forecast(in).Job(2)
	in.Arrivals = &Arrivals{RatePerS: 1.0 / 30, Like: []sched.Job{waiting(99, 1, 0)}}
	r := f.Forecast(in)
	with, _ := r.Job(2)
	if without.State != StateExpected || without.Likely != now+60 {
		t.Fatalf("without arrivals: %+v, want a start in 60 s", without)
	}
	// Skip-ahead lets the small jobs by: it starts much later, if at all.
	if with.State != StateExpected || (with.Likely != 0 && with.Likely < without.Likely+600) {
		t.Errorf("with 1-GPU jobs arriving every 30 s: %+v; want a start 10 minutes later at least", with)
	}
	if len(r.Jobs) != 1 {
		t.Errorf("forecasts %+v: want none for the expected arrivals", r.Jobs)
	}
	if again := f.Forecast(in); !reflect.DeepEqual(r, again) {
		t.Error("the same input with arrivals gave different forecasts")
	}
	// At the default bound, arrivals load the cluster fully at most: 2
	// GPUs / (1 GPU x 100 s) = one every 50 s, not every 30 s.
	r = newForecaster(t, "fjf").Forecast(in)
	if math.Abs(r.ArrivalsPerS-0.02) > 1e-9 {
		t.Errorf("expected %v arrivals a second, want 0.02", r.ArrivalsPerS)
	}
	if with, _ := r.Job(2); with.State != StateExpected || with.Latest == 0 || !(with.Likely > without.Likely) {
		t.Errorf("with arrivals at the bound: %+v; want a later start than %v, with a range", with, without.Likely)
	}
}

// A running job that is preempted and resumed is no waiting job's start:
// the forecast goes on until the waiting jobs themselves have started.
func TestForecastResumeIsNoStart(t *testing.T) {
	f, err := New(Config{Sched: sched.Config{Policy: "tiresias-l", Thresholds: []float64{100}}, Drift: -1})
	if err != nil {
		t.Fatal(err)
	}
	// One GPU. Job 1 runs and is demoted in 10 s; job 2 (whose user's
	// jobs run 50 s) then runs, and when it ends job 1 resumes; job 3
	// arrives at +300 (a retry backoff) in the top queue and takes the GPU.
	short := waiting(2, 1, now-5)
	short.User = "quick"
	var hist []Sample
	for range 10 {
		hist = append(hist, Sample{User: "quick", RunS: 50}, Sample{User: "u", RunS: 1000})
	}
	in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 1), Jobs: []sched.Job{running(1, 1, 90, now), short}},
		Later: []Arrival{{Job: waiting(3, 1, now-50), At: now + 300}}, History: NewHistory(hist, 0)}
	r := f.Forecast(in)
	for id, at := range map[int64]float64{2: now + 10, 3: now + 300} {
		if got, _ := r.Job(id); got.State != StateExpected || got.Earliest != at || got.Latest != at {
			t.Errorf("job %d: %+v; want a start at %v", id, got, at)
		}
	}
}

// A job the live pass preempts waits after it, and is forecast: else a
// job preempted after the forecast's snapshot has no forecast until the
// next one (the portal showed "unknown" in between).
func TestForecastPreemptedByTheLivePass(t *testing.T) {
	f, err := New(Config{Sched: sched.Config{Policy: "tiresias-l", Thresholds: []float64{100}}, Drift: -1})
	if err != nil {
		t.Fatal(err)
	}
	// One GPU. Job 1 has attained 150 GPU-s, past queue 0: job 2, new,
	// takes its GPU at once, runs 50 s, and job 1 resumes.
	short := waiting(2, 1, now-1)
	short.User = "quick"
	var hist []Sample
	for range 10 {
		hist = append(hist, Sample{User: "quick", RunS: 50}, Sample{User: "u", RunS: 1000})
	}
	in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 1), Jobs: []sched.Job{running(1, 1, 150, now), short}},
		History: NewHistory(hist, 0)}
	if d := f.fast.Schedule(in.Snapshot); len(d.Preempts) != 1 || d.Preempts[0].JobID != 1 {
		t.Fatalf("the live pass preempts %+v, want job 1", d.Preempts)
	}
	r := f.Forecast(in)
	want := map[int64]float64{1: now + 50, 2: now}
	for id, at := range want {
		if got, ok := r.Job(id); !ok || got.State != StateExpected || got.Earliest != at || got.Latest != at {
			t.Errorf("job %d: %+v, %v; want a start at %v", id, got, ok, at)
		}
	}
}

// The range's bounds are predictive quantiles: the order statistic at
// q(n+1), so that the 10th to 90th percentile of 10 samples spans the
// 1.1th to 9.9th of them (the plain quantiles, the 1.9th to 9.1th, would
// hold 65% of starts where these hold 80%).
func TestPredictive(t *testing.T) {
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	inf := math.Inf(1)
	for _, c := range []struct {
		name   string
		sorted []float64
		q      float64
		want   float64
	}{
		{"10th of 10", ten, 0.1, 1.1},
		{"90th of 10", ten, 0.9, 9.9},
		{"median of 10", ten, 0.5, 5.5},
		{"below the samples: the least", ten, 0.01, 1},
		{"above the samples: the greatest", ten, 0.99, 10},
		{"one sample", []float64{7}, 0.1, 7},
		{"next to a sample that did not start", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, inf}, 0.9, inf},
		{"all started but the last", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, inf}, 0.1, 1.1},
		{"20 samples", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, 0.1, 2.1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := predictive(c.sorted, c.q); !(math.Abs(got-c.want) < 1e-9 || got == c.want) {
				t.Errorf("predictive(%v, %v) = %v, want %v", c.sorted, c.q, got, c.want)
			}
		})
	}
}

// A running job stops at its time limit: a job waiting for its GPUs
// starts by then in every sample, however long the history says such
// jobs run.
func TestForecastTimeLimit(t *testing.T) {
	f := newForecaster(t, "fifo")
	holder := running(1, 2, 40, now)
	holder.TimeLimitS = 100 // 60 s left at most
	in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 2), Jobs: []sched.Job{holder, waiting(2, 2, now-5)}},
		History: runTimes(1000, 2000, 3000, 4000)}
	got, _ := f.Forecast(in).Job(2)
	if got.State != StateExpected || got.Latest > now+60+1 || got.Earliest != got.Latest {
		t.Errorf("forecast %+v: want a start at the holder's limit, 60 s from now", got)
	}
	// Without the limit, it waits for 1,000 s or more.
	holder.TimeLimitS = 0
	in.Snapshot.Jobs[0] = holder
	if got, _ := f.Forecast(in).Job(2); got.Earliest < now+900 {
		t.Errorf("forecast without a limit %+v: want 960 s or more from now", got)
	}
}

// TestForecastWindow: a queue longer than the window is forecast as the
// whole of it is (FIFO, where no job behind the window could start
// sooner), at a fraction of the visits; a window of a queue that fits in
// it changes nothing at all.
func TestForecastWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  string
		in      Input
		window  int
		fewerBy int // the windowed forecast visits fewer jobs by at least this factor
	}{
		{"1,000 waiting, window 100", "fifo", smallCluster(rand.New(rand.NewPCG(7, 8)), 1000), 100, 5},
		{"400 waiting on 32 GPUs, window 64", "fifo", bigInput(400, 16, 2), 64, 2},
		{"the queue fits in the window", "tiresias-l", bigInput(100, 16, 2), 500, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole, err := New(Config{Sched: sched.Config{Policy: tc.policy}, Window: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			windowed, err := New(Config{Sched: sched.Config{Policy: tc.policy}, Window: tc.window})
			if err != nil {
				t.Fatal(err)
			}
			want, got := whole.Forecast(tc.in), windowed.Forecast(tc.in)
			if len(got.Jobs) != len(want.Jobs) {
				t.Fatalf("%d forecasts, want %d", len(got.Jobs), len(want.Jobs))
			}
			expected := 0
			for i := range want.Jobs {
				if got.Jobs[i] != want.Jobs[i] {
					t.Errorf("job %d: %+v, the whole queue in view: %+v", want.Jobs[i].JobID, got.Jobs[i], want.Jobs[i])
				}
				if want.Jobs[i].State == StateExpected {
					expected++
				}
			}
			if expected < len(want.Jobs)/2 {
				t.Errorf("only %d of %d jobs forecast to start: the test shows little", expected, len(want.Jobs))
			}
			if got.Visits*tc.fewerBy > want.Visits {
				t.Errorf("visited %d jobs, the whole queue in view %d: want fewer by %d times", got.Visits, want.Visits, tc.fewerBy)
			}
		})
	}
}

// TestForecastWindowNevers: jobs that can never start (over their user's
// cap) wait behind the others, not in the window's places: the job
// behind them starts when the first GPUs free, as with the whole queue
// in view; and when nothing is left to happen to the jobs in view, those
// behind it are looked at all the same.
func TestForecastWindowNevers(t *testing.T) {
	var hist []Sample
	for range 5 {
		hist = append(hist, Sample{User: "u", Team: "t", Model: "resnet50", RunS: 100}, Sample{User: "v", Team: "t", Model: "resnet50", RunS: 10_000})
	}
	in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(2, 8),
		Teams: []sched.Team{{Name: "t", UserCaps: map[string]int{"capped": 1}}}}, History: NewHistory(hist, 5)}
	short := running(1, 8, 0, now) // its 8 GPUs free at now+100
	in.Snapshot.Jobs = append(in.Snapshot.Jobs, short)
	long := sched.Job{ID: 2, User: "v", Team: "t", GPUs: 8, State: sched.Running, SubmitTime: now - 10, LastStartTime: now,
		Model: "resnet50"} // ends at now+10,000
	for k := range 8 {
		long.Placement = append(long.Placement, gpu.Ref{Node: "n1", Index: k})
	}
	in.Snapshot.Jobs = append(in.Snapshot.Jobs, long)
	for i := range 40 {
		j := waiting(int64(10+i), 2, now-100+float64(i))
		j.User = "capped"
		in.Snapshot.Jobs = append(in.Snapshot.Jobs, j)
	}
	in.Snapshot.Jobs = append(in.Snapshot.Jobs, waiting(99, 1, now-1))
	f, err := New(Config{Sched: sched.Config{Policy: "fifo"}, Drift: -1, Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := f.Forecast(in)
	if fc, _ := r.Job(99); fc.State != StateExpected || fc.Likely != now+100 {
		t.Errorf("the job behind 40 that never start: %+v; want it expected at now+100", fc)
	}
	if fc, _ := r.Job(10); fc.State != StateNever {
		t.Errorf("a job over its user's cap: %+v; want never", fc)
	}

	// The same jobs with those that never start first in the order: the
	// window (16) is full of them; once the 8 GPUs free at now+100 and
	// the other 8 GPUs' job has ended, nothing is left to happen to them.
	in.Snapshot.Jobs[1].User = "u" // ends at now+100 too
	first := f.waits.Schedule(in.Snapshot)
	var order []int
	for i, j := range in.Snapshot.Jobs {
		if j.State == sched.Pending {
			order = append(order, i)
		}
	}
	sc := f.scenario(in, first, order, 16, 0, false, now+f.cfg.HorizonS)
	if at, ok := sc.starts[99]; !ok || at != now+100 {
		t.Errorf("the job behind a window of jobs that never start: started %v (%v); want at now+100", at, ok)
	}
}

// TestForecastLeavingJob: job 1, asked to stop, is leaving: it holds
// both GPUs for its grace period only, then waits again. Job 2 waits for
// GPUs. Seen as a leaving job, which the scheduler counts holding its
// GPUs and which has no end in a scenario, job 1 kept job 2 from them
// for ever ("never"); the forecast sees job 1 leave now and, first in
// line under fifo, start again and run the 970 s left of its 1,000, and
// job 2 start then.
//
// Told when job 1 is expected to have exited (Input.Leaving, 20 s from
// now), the forecast holds its GPUs until then (before, the GPUs it held
// for its handover were seen free at once): job 1 starts again at now+20
// and job 2 20 s later than above.
func TestForecastLeavingJob(t *testing.T) {
	f := newForecaster(t, "fifo")
	leaving := running(1, 2, 30, now)
	leaving.State = sched.Leaving
	for _, c := range []struct {
		name    string
		leaving map[int64]float64
		ending  map[int64]bool // cancelled: it does not wait again
		job2    float64
	}{
		{"leaving now", nil, nil, now + 970},
		{"leaving in 20 s", map[int64]float64{1: now + 20}, nil, now + 990},
		{"leaving now, cancelled", nil, map[int64]bool{1: true}, now},
		{"leaving in 20 s, cancelled", map[int64]float64{1: now + 20}, map[int64]bool{1: true}, now + 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 2), Jobs: []sched.Job{leaving, waiting(2, 2, now-5)}},
				History: runTimes(1000, 1000, 1000), Leaving: c.leaving, Ending: c.ending}
			got, ok := f.Forecast(in).Job(2)
			if !ok || got.State != StateExpected || got.Earliest != c.job2 || got.Latest != c.job2 {
				t.Errorf("job 2: %+v, %v; want a start at %v", got, ok, c.job2)
			}
		})
	}
}

// TestForecastHandover: job 1 has run for long (tiresias-l: queue 2
// against queue 0) and is preempted, by job 2 waiting now (the live pass
// itself preempts) or by job 3 arriving 100 s from now (a scenario's
// pass), and takes the handover (Input.HandoverS) to save its checkpoint
// and leave: the preemptor starts on its GPUs once it has, as the engine
// starts it, not when it is placed.
func TestForecastHandover(t *testing.T) {
	f := newForecaster(t, "tiresias-l")
	long := running(1, 2, 50_000, now)
	for _, c := range []struct {
		name      string
		jobs      []sched.Job
		later     []Arrival
		handoverS float64
		id        int64
		at        float64
	}{
		{"the live pass preempts, no handover", []sched.Job{long, waiting(2, 2, now-1)}, nil, 0, 2, now},
		{"the live pass preempts, a 20 s handover", []sched.Job{long, waiting(2, 2, now-1)}, nil, 20, 2, now + 20},
		{"a scenario preempts, no handover", []sched.Job{long}, []Arrival{{Job: waiting(3, 2, now+100), At: now + 100}}, 0, 3, now + 100},
		{"a scenario preempts, a 20 s handover", []sched.Job{long}, []Arrival{{Job: waiting(3, 2, now+100), At: now + 100}}, 20, 3, now + 120},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 2), Jobs: c.jobs}, Later: c.later,
				History: runTimes(1000, 1000, 1000), HandoverS: c.handoverS}
			if got, ok := f.Forecast(in).Job(c.id); !ok || got.State != StateExpected || got.Earliest != c.at || got.Latest != c.at {
				t.Errorf("job %d: %+v, %v; want a start at %v", c.id, got, ok, c.at)
			}
		})
	}
}
