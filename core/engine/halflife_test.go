package engine

import (
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
)

func TestHalfLifeSeconds(t *testing.T) {
	cases := []struct {
		name string
		in   time.Duration
		want float64
	}{
		{"zero is the default", 0, sched.DefaultHalfLifeS},
		{"negative is no decay", -1, -1},
		{"a day", 24 * time.Hour, 86400},
	}
	for _, c := range cases {
		if got := halfLifeSeconds(c.in); got != c.want {
			t.Errorf("%s: halfLifeSeconds(%v) = %v, want %v", c.name, c.in, got, c.want)
		}
	}
	// No decay keeps usage whole, as sched.DecayUsage reads it.
	if got := sched.DecayUsage(100, 3600, halfLifeSeconds(-1), 50); got != 150 {
		t.Errorf("usage without decay %v, want 150", got)
	}
}
