package idle

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// minutes is one GPU's minute readings from t0 on, one per value.
func minutes(utils ...float64) []Sample {
	out := make([]Sample, len(utils))
	for i, u := range utils {
		out[i] = Sample{T: t0.Add(time.Duration(i) * time.Minute), Step: time.Minute, UtilPct: u}
	}
	return out
}

// seconds appends per-second readings of util from at for n seconds.
func seconds(ss []Sample, at time.Time, n int, util float64) []Sample {
	for i := range n {
		ss = append(ss, Sample{T: at.Add(time.Duration(i) * time.Second), Step: time.Second, UtilPct: util})
	}
	return ss
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestDetect(t *testing.T) {
	rule := Rule{After: 10 * time.Minute, BelowPct: 5}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	busyThenLow := minutes(append(repeat(90, 5), repeat(1, 15)...)...) // low from minute 5
	for _, tc := range []struct {
		name       string
		rule       Rule
		start, now time.Time
		gpus       [][]Sample
		want       State
	}{
		{"working", rule, t0, at(20), [][]Sample{minutes(repeat(95, 20)...)}, State{Known: true}},
		{"low long enough", rule, t0, at(20), [][]Sample{busyThenLow}, State{Idle: true, Since: at(5), Known: true}},
		{"low, not long enough yet", rule, t0, at(14), [][]Sample{busyThenLow[:14]}, State{Since: at(5), Known: true}},
		{"exactly the rule's time", rule, t0, at(15), [][]Sample{busyThenLow[:15]}, State{Idle: true, Since: at(5), Known: true}},
		{"at the threshold is working", rule, t0, at(20), [][]Sample{minutes(repeat(5, 20)...)}, State{Known: true}},
		{"one GPU of two works", rule, t0, at(20), [][]Sample{busyThenLow, minutes(repeat(60, 20)...)}, State{Known: true}},
		{"two low GPUs: since the later", rule, t0, at(20),
			[][]Sample{busyThenLow, minutes(append(repeat(90, 8), repeat(0, 12)...)...)}, State{Idle: true, Since: at(8), Known: true}},
		{"low since the run started", rule, at(2), at(20), [][]Sample{minutes(repeat(0, 20)...)[2:]}, State{Idle: true, Since: at(2), Known: true}},
		{"low for the whole lookback: capped", rule, t0, at(60), [][]Sample{minutes(repeat(0, 60)...)},
			State{Idle: true, Since: at(40), Capped: true, Known: true}},
		{"readings before the run are ignored", rule, at(5), at(20), [][]Sample{minutes(append(repeat(99, 5), repeat(2, 15)...)...)},
			State{Idle: true, Since: at(5), Known: true}},
		{"a blip breaks it", rule, t0, at(20), [][]Sample{minutes(append(append(repeat(0, 12), 40), repeat(0, 7)...)...)},
			State{Since: at(13), Known: true}},
		{"minutes then live seconds", rule, t0, at(20).Add(30 * time.Second),
			[][]Sample{seconds(busyThenLow, at(20), 30, 2)}, State{Idle: true, Since: at(5), Known: true}},
		{"live seconds show work again", rule, t0, at(20).Add(30 * time.Second),
			[][]Sample{seconds(seconds(busyThenLow, at(20), 20, 2), at(20).Add(20*time.Second), 10, 80)}, State{Known: true}},
		{"silent lately: unknown", rule, t0, at(30), [][]Sample{busyThenLow}, State{}},
		{"no readings: unknown", rule, t0, at(30), [][]Sample{nil}, State{}},
		{"one GPU silent: unknown", rule, t0, at(20), [][]Sample{busyThenLow, nil}, State{}},
		{"a gap in the readings restarts the count", rule, t0, at(20),
			[][]Sample{append(minutes(repeat(0, 6)...), minutes(repeat(0, 20)...)[10:]...)}, State{Idle: true, Since: at(10), Known: true}},
		{"no rule", Rule{}, t0, at(20), [][]Sample{busyThenLow}, State{}},
		{"no GPUs", rule, t0, at(20), nil, State{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Detect(tc.rule, tc.start, tc.now, tc.gpus)
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestDetectSameFromLookbackOnly checks the promise callers rely on:
// passing only the readings of the lookback gives the verdict that the
// whole run gives.
func TestDetectSameFromLookbackOnly(t *testing.T) {
	rule := Rule{After: 10 * time.Minute, BelowPct: 5}
	run := minutes(append(append(repeat(80, 30), repeat(0, 50)...), append(repeat(70, 3), repeat(1, 37)...)...)...)
	for m := 1; m <= len(run); m++ {
		now := t0.Add(time.Duration(m) * time.Minute)
		var window []Sample
		for _, s := range run[:m] {
			if s.end().After(now.Add(-rule.Lookback())) {
				window = append(window, s)
			}
		}
		full, part := Detect(rule, t0, now, [][]Sample{run[:m]}), Detect(rule, t0, now, [][]Sample{window})
		if full != part {
			t.Fatalf("at minute %d: whole run %+v, lookback only %+v", m, full, part)
		}
	}
}

func TestOverride(t *testing.T) {
	server := Rule{After: 30 * time.Minute, BelowPct: 5}
	for _, tc := range []struct {
		name      string
		server    Rule
		own, want Rule
	}{
		{"nothing of its own: the server's", server, Rule{}, server},
		{"its own threshold", server, Rule{BelowPct: 20}, Rule{After: 30 * time.Minute, BelowPct: 20}},
		{"its own time", server, Rule{After: 10 * time.Minute}, Rule{After: 10 * time.Minute, BelowPct: 5}},
		{"both its own", server, Rule{After: time.Hour, BelowPct: 1}, Rule{After: time.Hour, BelowPct: 1}},
		{"its own time where the server flags nothing", Rule{BelowPct: 5}, Rule{After: 10 * time.Minute}, Rule{After: 10 * time.Minute, BelowPct: 5}},
		{"the server flags nothing, the team sets no time", Rule{BelowPct: 5}, Rule{BelowPct: 50}, Rule{BelowPct: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.server.Override(tc.own); got != tc.want {
				t.Errorf("%+v.Override(%+v) = %+v, want %+v", tc.server, tc.own, got, tc.want)
			}
		})
	}
}

func TestCheckRule(t *testing.T) {
	for _, tc := range []struct {
		after time.Duration
		ok    bool
	}{
		{0, true}, {MinAfter, true}, {30 * time.Minute, true}, {MaxAfter, true},
		{-time.Second, false}, {time.Millisecond, false}, {MaxAfter + time.Second, false},
	} {
		if err := CheckAfter(tc.after); (err == nil) != tc.ok {
			t.Errorf("CheckAfter(%v) = %v, want ok %v", tc.after, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		pct float64
		ok  bool
	}{
		{0.5, true}, {5, true}, {100, true},
		{0, false}, {-1, false}, {100.5, false}, {math.NaN(), false},
	} {
		if err := CheckBelow(tc.pct); (err == nil) != tc.ok {
			t.Errorf("CheckBelow(%v) = %v, want ok %v", tc.pct, err, tc.ok)
		}
	}
}
