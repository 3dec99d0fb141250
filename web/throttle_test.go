package web

import (
	"testing"
	"time"
)

// TestThrottleDelays: free failures, then delays that double up to the
// cap; a success forgets; an hour without failures forgets.
func TestThrottleDelays(t *testing.T) {
	th := newThrottle()
	t0 := time.Unix(1_000_000, 0)
	now := t0
	for range 3 {
		th.fail(now, "k", 3)
	}
	if w := th.wait(now, "k"); w != 0 {
		t.Fatalf("after the free failures: wait %v, want 0", w)
	}
	var got []time.Duration
	for range 12 {
		th.fail(now, "k", 3)
		w := th.wait(now, "k")
		got = append(got, w)
		now = now.Add(w) // the client waits, then fails again
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays %v, want %v seconds", got, want)
		}
	}
	if w := th.wait(now.Add(-time.Second), "other"); w != 0 {
		t.Errorf("another key waits %v", w)
	}
	th.succeed("k")
	if w := th.wait(now, "k"); w != 0 {
		t.Errorf("after a success: wait %v", w)
	}
	for range 4 {
		th.fail(now, "k", 3)
	}
	later := now.Add(throttleForget)
	th.fail(later, "k", 3)
	if w := th.wait(later, "k"); w != 0 {
		t.Errorf("a failure an hour after the last counts as the first: wait %v", w)
	}
}

func TestLoginKeys(t *testing.T) {
	tests := []struct {
		name, addr, pair, address string
	}{
		{"Alice", "192.0.2.1", "pair:alice\x00192.0.2.1", "addr:192.0.2.1"},
		{"bob", "2001:db8::1", "pair:bob\x002001:db8::/64", "addr:2001:db8::/64"},
		{"bob", "2001:db8::ffff:1", "pair:bob\x002001:db8::/64", "addr:2001:db8::/64"},
	}
	for _, tc := range tests {
		pair, addr := loginKeys(tc.name, tc.addr)
		if pair != tc.pair || addr != tc.address {
			t.Errorf("loginKeys(%q, %q) = %q, %q; want %q, %q", tc.name, tc.addr, pair, addr, tc.pair, tc.address)
		}
	}
}
