package sched

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestNewRejectsBadConfigs(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown policy", Config{Policy: "lottery"}, "unknown policy"},
		{"empty policy", Config{}, "unknown policy"},
		{"thresholds must increase", Config{Policy: "tiresias-l", Thresholds: []float64{7200, 3250}}, "must increase"},
		{"thresholds must be positive", Config{Policy: "tiresias-l", Thresholds: []float64{0}}, "positive"},
		{"thresholds must be finite", Config{Policy: "tiresias-l", Thresholds: []float64{math.Inf(1)}}, "finite"},
		{"knob must not be negative", Config{Policy: "tiresias-l", PromoteKnob: -1}, "promote knob"},
		{"quantum must be positive", Config{Policy: "tiresias-g", GittinsQuantum: -1}, "quantum"},
		{"samples must be finite", Config{Policy: "tiresias-g", GPUTimeSamples: []float64{math.NaN()}}, "sample"},
		{"unknown placement", Config{Policy: "fifo", Placement: "random"}, "placement"},
		{"skew threshold above 1", Config{Policy: "fifo", SkewThreshold: 2}, "skew"},
		{"NaN locality wait", Config{Policy: "fifo", LocalityWaitS: math.NaN()}, "locality"},
		{"unknown share placement", Config{Policy: "fifo", SharePlacement: "emptiest"}, "share placement"},
	}
	for _, c := range cases {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

func TestNewFillsDefaults(t *testing.T) {
	sc := mustNew(t, Config{Policy: "tiresias-l"})
	got := sc.Config()
	if !slices.Equal(got.Thresholds, []float64{3250, 7200}) || got.Placement != PlaceNodes ||
		got.LocalityWaitS != DefaultLocalityWaitS || got.SkewThreshold != DefaultSkewThreshold ||
		got.GittinsQuantum != DefaultGittinsQuantum || got.SharePlacement != ShareFreeFirst || sc.Queues() != 3 {
		t.Errorf("defaults: %+v, %d queues", got, sc.Queues())
	}
	if q := mustNew(t, Config{Policy: "fifo"}).Queues(); q != 1 {
		t.Errorf("fifo has %d queues, want 1", q)
	}
}

func TestPolicies(t *testing.T) {
	want := []string{"fifo", "fjf", "srtf", "srsf", "dlas", "tiresias-l", "tiresias-g"}
	if !slices.Equal(Policies(), want) {
		t.Errorf("Policies() = %v, want %v", Policies(), want)
	}
	for _, p := range PolicyInfos() {
		if _, err := New(Config{Policy: p.Name}); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if p.NeedsDurations != (p.Name == "srtf" || p.Name == "srsf") {
			t.Errorf("%s: NeedsDurations %v", p.Name, p.NeedsDurations)
		}
		if p.Preemptive != policyByName(p.Name).preempts {
			t.Errorf("%s: Preemptive %v disagrees with the pass", p.Name, p.Preemptive)
		}
	}
}
