package web

import (
	"sync"
	"time"
)

// limiter counts recent failures per key.
type limiter struct {
	max    int
	window time.Duration

	mu    sync.Mutex
	fails map[string][]time.Time
}

func newLimiter(max int, window time.Duration) *limiter {
	return &limiter{max: max, window: window, fails: make(map[string][]time.Time)}
}

// blocked reports whether any key has reached the limit at now, and when
// the oldest counted failure expires.
func (l *limiter) blocked(now time.Time, keys ...string) (bool, time.Duration) {
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

// fail counts a failure for every key.
func (l *limiter) fail(now time.Time, keys ...string) {
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

func (l *limiter) prune(k string, now time.Time) []time.Time {
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
