package telemetry

// ring keeps the last size values added. Its buffer grows as values come,
// up to size, so that a series sampled only briefly stays small.
type ring[T any] struct {
	buf  []T
	size int
	next int // where the next value goes once full
	full bool
}

func newRing[T any](n int) *ring[T] { return &ring[T]{size: max(1, n)} }

func (r *ring[T]) add(v T) {
	if !r.full {
		r.buf = append(r.buf, v)
		r.full = len(r.buf) == r.size
		return
	}
	r.buf[r.next] = v
	r.next++
	if r.next == r.size {
		r.next = 0
	}
}

// since returns, oldest first, the values whose time is at least t.
func (r *ring[T]) since(t int64, time func(T) int64) []T {
	var ordered []T
	if r.full {
		ordered = append(append(ordered, r.buf[r.next:]...), r.buf[:r.next]...)
	} else {
		ordered = append(ordered, r.buf...)
	}
	i := 0
	for i < len(ordered) && time(ordered[i]) < t {
		i++
	}
	return ordered[i:]
}
