package notify

import "time"

// Backoff is how long to wait after the attempt-th failed attempt (from
// 1): base, then twice as long each time, at most max.
func Backoff(attempt int, base, max time.Duration) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt; i++ {
		d *= 2
		if d >= max || d <= 0 {
			return max
		}
	}
	return min(d, max)
}
