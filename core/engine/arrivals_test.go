package engine

import (
	"math"
	"testing"
	"time"
)

// TestArrivalRate: the rate the forecasts expect arrivals at follows the
// recent submissions, not an opening burst long past.
func TestArrivalRate(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	// burstThenSteady is 50 submissions in the first 10 s, then one a
	// minute for ten minutes, newest first.
	burstThenSteady := func() []time.Time {
		var at []time.Time
		for i := 0; i < 50; i++ {
			at = append(at, t0.Add(time.Duration(i)*200*time.Millisecond))
		}
		for m := 1; m <= 10; m++ {
			at = append(at, t0.Add(10*time.Second+time.Duration(m)*time.Minute))
		}
		for i, j := 0, len(at)-1; i < j; i, j = i+1, j-1 {
			at[i], at[j] = at[j], at[i]
		}
		return at
	}
	tests := []struct {
		name   string
		at     []time.Time
		now    time.Time
		window time.Duration
		want   float64 // per minute
	}{
		{"burst ten minutes past: the recent rate", burstThenSteady(), t0.Add(10*time.Minute + 20*time.Second), 5 * time.Minute, 1},
		{"in the burst: the burst's rate", burstThenSteady()[10:], t0.Add(10 * time.Second), 5 * time.Minute, 50.0 / 10 * 60},
		{"younger than the window: over the time since the oldest", []time.Time{t0.Add(60 * time.Second), t0.Add(30 * time.Second), t0}, t0.Add(90 * time.Second), 5 * time.Minute, 2},
		{"none in the window", []time.Time{t0}, t0.Add(time.Hour), 5 * time.Minute, 0},
		{"none", nil, t0, 5 * time.Minute, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := arrivalRate(tc.at, tc.now, tc.window) * 60
			if math.Abs(got-tc.want) > 1e-9*math.Max(1, tc.want) {
				t.Errorf("rate %.4f a minute, want %.4f", got, tc.want)
			}
		})
	}
	// The rate over the time since the oldest, as it was taken before,
	// stays near 6 a minute ten minutes after the burst.
	at := burstThenSteady()
	now := t0.Add(10*time.Minute + 20*time.Second)
	if old := arrivalRate(at, now, time.Hour) * 60; old < 5 {
		t.Errorf("rate since the oldest %.2f a minute, want the burst to hold it near 6", old)
	}
}
