package models

import (
	"maps"
	"sync"
)

// writeCounter counts rows the store wrote, by kind, since it opened.
type writeCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (w *writeCounter) add(kind string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = make(map[string]int64)
	}
	w.n[kind] += int64(n)
}

// Writes returns the rows written since the store opened, by kind ("job":
// submissions, "gpu_history": GPU history minutes, "wait_reason": waiting
// jobs' reasons changed by the engine); /metrics turns them
// into rates.
func (s *Store) Writes() map[string]int64 {
	s.writes.mu.Lock()
	defer s.writes.mu.Unlock()
	return maps.Clone(s.writes.n)
}
