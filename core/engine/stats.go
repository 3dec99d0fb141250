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
	TimedOut     int64 // runs stopped at their job's time limit
	NodesRemoved int64
	// StrayRuns counts runs stopped because the cluster no longer wanted
	// them (runs.go): a machine came back with a run that was replaced.
	StrayRuns int64
	// Handovers and HandoverSeconds: starts that waited for a stopping
	// run to release their GPUs, and the time from asking it to stop to
	// the start; HandoverMax is the longest.
	Handovers       int64
	HandoverSeconds float64
	HandoverMax     time.Duration
	// Releases and ReleaseSeconds: runs asked to stop, and the time until
	// their last part exited.
	Releases       int64
	ReleaseSeconds float64
	// UnrecordedExits is how many job exits wait for the store (runs.go).
	UnrecordedExits int64
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

func (st *stats) handover(d time.Duration) {
	st.add(func(s *Stats) {
		s.Handovers++
		s.HandoverSeconds += d.Seconds()
		s.HandoverMax = max(s.HandoverMax, d)
	})
}

func (st *stats) released(d time.Duration) {
	st.add(func(s *Stats) {
		s.Releases++
		s.ReleaseSeconds += max(0, d.Seconds())
	})
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
