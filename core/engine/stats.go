package engine

import (
	"sync"
	"time"
)

// Stats counts what the engine has done since it started, for /metrics.
type Stats struct {
	Passes       int64
	PassSeconds  float64 // total time inside the scheduling core
	LastPass     time.Duration
	Preemptions  int64
	Reclaims     int64 // preemptions that gave borrowed GPUs back to a team under its guarantee
	Starts       int64
	Requeues     int64 // jobs put back after their machine was lost
	Retries      int64
	NodesRemoved int64
}

type stats struct {
	mu sync.Mutex
	s  Stats
}

func (st *stats) pass(d time.Duration, preempts, reclaims, starts int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Passes++
	st.s.PassSeconds += d.Seconds()
	st.s.LastPass = d
	st.s.Preemptions += int64(preempts)
	st.s.Reclaims += int64(reclaims)
	st.s.Starts += int64(starts)
}

func (st *stats) add(f func(*Stats)) {
	st.mu.Lock()
	defer st.mu.Unlock()
	f(&st.s)
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	return e.stats.s
}
