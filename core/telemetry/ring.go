package telemetry

// ring keeps the last cap values added.
type ring[T any] struct {
	buf  []T
	next int
	full bool
}

func newRing[T any](n int) *ring[T] { return &ring[T]{buf: make([]T, n)} }

func (r *ring[T]) add(v T) {
	r.buf[r.next] = v
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// since returns, oldest first, the values whose time is at least t.
func (r *ring[T]) since(t int64, time func(T) int64) []T {
	var ordered []T
	if r.full {
		ordered = append(append(ordered, r.buf[r.next:]...), r.buf[:r.next]...)
	} else {
		ordered = append(ordered, r.buf[:r.next]...)
	}
	i := 0
	for i < len(ordered) && time(ordered[i]) < t {
		i++
	}
	return ordered[i:]
}
