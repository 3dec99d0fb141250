package telemetry

import "sync"

// Feed is a subscription that misses no frame while its reader keeps up
// on average: frames gather until the reader takes them all at once, so a
// reader that stalls for a moment (a database write, a busy core) catches
// up in one batch instead of losing what came meanwhile. Only past max
// frames waiting does the feed drop the oldest, and it counts them.
type Feed struct {
	mu      sync.Mutex
	frames  []Frame
	max     int
	dropped int64
	ready   chan struct{}
}

// Feed subscribes a Feed holding up to n waiting frames (at least 1);
// call the returned function to stop it.
func (r *Recorder) Feed(n int) (*Feed, func()) {
	f := &Feed{max: max(1, n), ready: make(chan struct{}, 1)}
	r.mu.Lock()
	r.feeds[f] = struct{}{}
	r.mu.Unlock()
	return f, func() {
		r.mu.Lock()
		delete(r.feeds, f)
		r.mu.Unlock()
	}
}

// Ready is signalled when frames are waiting.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Take returns the waiting frames, oldest first, and how many were
// dropped since the last call because the reader fell max frames behind.
func (f *Feed) Take() ([]Frame, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out, d := f.frames, f.dropped
	f.frames, f.dropped = nil, 0
	return out, d
}

func (f *Feed) put(fr Frame) {
	f.mu.Lock()
	if len(f.frames) >= f.max {
		n := len(f.frames) - f.max + 1
		f.frames = append(f.frames[:0], f.frames[n:]...)
		f.dropped += int64(n)
	}
	f.frames = append(f.frames, fr)
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
	}
}
