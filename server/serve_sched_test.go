package server

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
)

// TestSchedConfigZeroMeansWhatTheFlagSays checks that a zero the user
// gives reaches the core as that zero's meaning, not as the core's
// default for a zero field.
func TestSchedConfigZeroMeansWhatTheFlagSays(t *testing.T) {
	base := serveFlags{policy: "tiresias-l", cpuAlloc: sched.AllocProportional, minRuntime: 10 * time.Minute,
		halfLife: 7 * 24 * time.Hour, reserveAfter: 5 * time.Minute, maxReservations: 1, set: map[string]bool{}}
	cases := []struct {
		name    string
		edit    func(*serveFlags)
		minRunS float64 // the scheduler's MinRuntimeS after New
		ref     bool
		err     string
	}{
		{name: "the default minimum runtime", edit: func(*serveFlags) {}, minRunS: 600},
		{name: "--min-runtime 0s is no minimum", edit: func(f *serveFlags) { f.minRuntime = 0 }, minRunS: sched.NoMinRuntime},
		{name: "--min-runtime 90s", edit: func(f *serveFlags) { f.minRuntime = 90 * time.Second }, minRunS: 90},
		{name: "--demo shortens the default", edit: func(f *serveFlags) { f.demo = true }, minRunS: 30},
		{name: "--demo with --min-runtime 0s is no minimum", edit: func(f *serveFlags) {
			f.demo, f.minRuntime, f.set = true, 0, map[string]bool{"min-runtime": true}
		}, minRunS: sched.NoMinRuntime},
		{name: "--reference", edit: func(f *serveFlags) { f.reference = true }, minRunS: 600, ref: true},
		{name: "a negative --min-runtime", edit: func(f *serveFlags) { f.minRuntime = -time.Second }, err: "--min-runtime"},
		{name: "a negative --half-life", edit: func(f *serveFlags) { f.halfLife = -time.Hour }, err: "--half-life"},
		{name: "a negative --reserve-after", edit: func(f *serveFlags) { f.reserveAfter = -time.Second }, err: "--reserve-after"},
		{name: "--max-reservations 0", edit: func(f *serveFlags) { f.maxReservations = 0 }, err: "--max-reservations"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := base
			c.edit(&f)
			cfg, err := schedConfig(f)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sc, err := sched.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := sc.Config(); got.MinRuntimeS != c.minRunS || got.Reference != c.ref {
				t.Errorf("MinRuntimeS %v, Reference %v; want %v, %v", got.MinRuntimeS, got.Reference, c.minRunS, c.ref)
			}
		})
	}
	f := base
	f.limitsAsHints = true
	if cfg, err := schedConfig(f); err != nil || !cfg.LimitsAsHints {
		t.Errorf("--limits-as-hints: LimitsAsHints %v, %v; want true", cfg.LimitsAsHints, err)
	}
	f = base
	if cfg, err := schedConfig(f); err != nil || cfg.ReserveAfterS != 300 || cfg.MaxReservations != 1 {
		t.Errorf("default --reserve-after: %v s, %d reservations, %v; want 300 s, 1", cfg.ReserveAfterS, cfg.MaxReservations, err)
	}
	f.reserveAfter = 0
	if cfg, err := schedConfig(f); err != nil || cfg.ReserveAfterS != 0 {
		t.Errorf("--reserve-after 0: %v s, %v; want off", cfg.ReserveAfterS, err)
	}
	if h := engineHalfLife(0); h >= 0 {
		t.Errorf("--half-life 0 reaches the engine as %v, want negative (no decay)", h)
	}
}
