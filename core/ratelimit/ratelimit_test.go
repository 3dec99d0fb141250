package ratelimit

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := New(3, time.Minute)
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if b, _ := l.Blocked(t0, "ip:a", "user:x"); b {
			t.Fatalf("blocked after %d failures", i)
		}
		l.Fail(t0.Add(time.Duration(i)*time.Second), "ip:a", "user:x")
	}
	b, wait := l.Blocked(t0.Add(10*time.Second), "ip:b", "user:x")
	if !b || wait != 50*time.Second {
		t.Errorf("after 3 failures for user x: blocked %v for %v, want 50s (from any address)", b, wait)
	}
	if b, _ := l.Blocked(t0.Add(10*time.Second), "ip:b", "user:y"); b {
		t.Error("another user from another address is blocked")
	}
	if b, _ := l.Blocked(t0.Add(61*time.Second), "ip:a", "user:x"); b {
		t.Error("still blocked once the window has passed")
	}
}
