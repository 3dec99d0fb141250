// Package ratelimit counts recent failures per key (a client address, a
// user name), so that a caller can refuse a key that failed too often:
// wrong passwords at the portal's login, wrong tokens at the agents'
// endpoint.
package ratelimit

import (
	"sync"
	"time"
)

// Limiter counts recent failures per key: at most max within window.
type Limiter struct {
	max    int
	window time.Duration

	mu    sync.Mutex
	fails map[string][]time.Time
}

// New returns a limiter of max failures per key within window.
func New(max int, window time.Duration) *Limiter {
	return &Limiter{max: max, window: window, fails: make(map[string][]time.Time)}
}

// Blocked reports whether any key has reached the limit at now, and when
// the oldest counted failure expires.
func (l *Limiter) Blocked(now time.Time, keys ...string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var wait time.Duration
	for _, k := range keys {
		fs := l.prune(k, now)
		if len(fs) >= l.max {
			wait = max(wait, fs[0].Add(l.window).Sub(now))
		}
	}
	return wait > 0, wait
}

// Fail counts a failure for every key.
func (l *Limiter) Fail(now time.Time, keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		l.fails[k] = append(l.prune(k, now), now)
	}
	// Keep the map from growing without bound under a spray of names.
	if len(l.fails) > 100000 {
		for k := range l.fails {
			if len(l.prune(k, now)) == 0 {
				delete(l.fails, k)
			}
		}
	}
}

func (l *Limiter) prune(k string, now time.Time) []time.Time {
	fs := l.fails[k]
	i := 0
	for i < len(fs) && now.Sub(fs[i]) >= l.window {
		i++
	}
	fs = fs[i:]
	if len(fs) == 0 {
		delete(l.fails, k)
		return nil
	}
	l.fails[k] = fs
	return fs
}
