package agent

import (
	"testing"
	"time"
)

// TestFencedAt: a run that ended while no server had been heard for the
// heartbeat timeout was fenced, not failed, even if the silence has ended
// since.
func TestFencedAt(t *testing.T) {
	c := &Client{}
	now := time.Now()
	c.timeout.Store(int64(2 * time.Second))
	c.heard.Store(now.Add(-10 * time.Second).UnixNano())
	c.hear() // heard again now, after a 10 s silence: fenced from -8 s to now
	tests := []struct {
		name string
		at   time.Time
		want bool
	}{
		{"before the silence", now.Add(-11 * time.Second), false},
		{"early in the silence, before the timeout", now.Add(-9 * time.Second), false},
		{"within the silence, after the timeout", now.Add(-5 * time.Second), true},
		{"just before the lease ran out", now.Add(-8*time.Second - 100*time.Millisecond), true},
		{"after a server was heard again", now.Add(500 * time.Millisecond), false},
		{"a new silence past the timeout", now.Add(3 * time.Second), true},
	}
	for _, tc := range tests {
		if got := c.fencedAt(tc.at); got != tc.want {
			t.Errorf("%s: fencedAt = %v, want %v", tc.name, got, tc.want)
		}
	}
}
