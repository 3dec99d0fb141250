package engine

import (
	"maps"
	"slices"
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
	Requeues     int64 // jobs put back without counting a failure (RequeuedBy says why)
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
	// Coalesced counts the exits and wakes that joined a pass already due
	// for another event (Run): the passes saved.
	Coalesced int64
	// UnrecordedExits is how many job exits wait for the store (runs.go).
	UnrecordedExits int64

	// PassTime is the time of each pass inside the scheduling core
	// (PassBuckets).
	PassTime Histogram
	// WholePass is the time of each whole pass (PassBuckets): reading the
	// jobs, scheduling, acting on the decisions and recording them;
	// LastWholePass the last one's, and PhaseSeconds the total time by
	// phase (the Phase* constants).
	WholePass     Histogram
	LastWholePass time.Duration
	PhaseSeconds  map[string]float64
	// ExitLag is the time from a run's end, as its machine saw it, to the
	// store's record of it (LagBuckets): what exits wait behind passes.
	ExitLag Histogram
	// SubmitToStart is, per queue and team, the time from a job's
	// submission to its first start; QueueWait the time each run waited
	// for its GPUs: since the submission for a first run, since the job
	// waited again (or its retry backoff ended) for later ones
	// (WaitBuckets). A job's queue is the one it started from.
	SubmitToStart map[QueueTeam]Histogram
	QueueWait     map[QueueTeam]Histogram
	// Preempted counts Preemptions by cause (PreemptReclaim,
	// PreemptPriority) and the preempted job's team.
	Preempted map[CauseTeam]int64
	// Reclaimed counts Reclaims by the team that took its GPUs back.
	Reclaimed map[string]int64
	// RequeuedBy counts Requeues by cause (the Requeue* constants);
	// RetriedBy counts Retries by cause (RetryExitCode, RetryError).
	RequeuedBy map[string]int64
	RetriedBy  map[string]int64
}

// QueueTeam keys a figure by a job's priority queue (0 the highest) and
// team.
type QueueTeam struct {
	Queue int
	Team  string
}

// CauseTeam keys a counter by cause and team.
type CauseTeam struct {
	Cause, Team string
}

// The causes of preemptions: a team under its guarantee took back GPUs
// another team borrowed, or the policy's own order (within a team, or
// between any jobs when fair share is off).
const (
	PreemptReclaim  = "reclaim"
	PreemptPriority = "priority"
)

// The causes of requeues: the job's machine was lost (or came back
// without it), a GPU it ran on failed, its agent could not run it (not
// the job's fault), or it outgrew its Salus lane.
const (
	RequeueNodeLost    = "node_lost"
	RequeueGPUFault    = "gpu_fault"
	RequeueAgentError  = "agent_error"
	RequeueOutgrewLane = "outgrew_lane"
)

// The causes of retries: the job exited with a non-zero code, or it
// could not start or was ended by a signal (its exit says why).
const (
	RetryExitCode = "exit_code"
	RetryError    = "error"
)

// The phases of a whole pass (Stats.PhaseSeconds): read the jobs and the
// machines' state and build the snapshot; ask the scheduling core; start
// and preempt jobs; record queues, shares, wait reasons and forecasts.
const (
	PhaseLoad     = "load"
	PhaseSchedule = "schedule"
	PhaseApply    = "apply"
	PhaseRecord   = "record"
)

// The phases' indexes in Phases.
const (
	phaseLoad = iota
	phaseSchedule
	phaseApply
	phaseRecord
)

// Phases lists the phases of a pass in order.
func Phases() []string { return []string{PhaseLoad, PhaseSchedule, PhaseApply, PhaseRecord} }

// PreemptCauses lists every cause of preemptions, so that /metrics
// shows each counter from 0; RequeueCauses and RetryCauses likewise.
func PreemptCauses() []string { return []string{PreemptReclaim, PreemptPriority} }

// RequeueCauses lists every cause of requeues.
func RequeueCauses() []string {
	return []string{RequeueNodeLost, RequeueGPUFault, RequeueAgentError, RequeueOutgrewLane}
}

// RetryCauses lists every cause of retries.
func RetryCauses() []string { return []string{RetryExitCode, RetryError} }

// Histogram counts observations in buckets, as a Prometheus histogram
// does. The zero value has no buckets and counts only Count and Sum.
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending; Counts[i] counts
	// the observations in (Bounds[i-1], Bounds[i]] (not cumulative).
	// Observations above the last bound count only in Count and Sum.
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

// PassBuckets are the bounds, in seconds, of Stats.PassTime.
func PassBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

// LagBuckets are the bounds, in seconds, of Stats.ExitLag.
func LagBuckets() []float64 {
	return []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
}

// WaitBuckets are the bounds, in seconds, of Stats.SubmitToStart and
// Stats.QueueWait: from a second to three days.
func WaitBuckets() []float64 {
	return []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 259200}
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds))}
}

// observe adds one observation of v.
func (h *Histogram) observe(v float64) {
	h.Count++
	h.Sum += v
	if i, _ := slices.BinarySearch(h.Bounds, v); i < len(h.Bounds) {
		h.Counts[i]++
	}
}

// Cumulative returns, per bound, the observations at or below it, as
// Prometheus exports them.
func (h Histogram) Cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, len(h.Bounds))
	var n uint64
	for i, b := range h.Bounds {
		n += h.Counts[i]
		out[b] = n
	}
	return out
}

func (h Histogram) clone() Histogram {
	h.Bounds, h.Counts = slices.Clone(h.Bounds), slices.Clone(h.Counts)
	return h
}

type stats struct {
	mu sync.Mutex
	s  Stats
}

// emptyStats are the counters of an engine that has done nothing.
func emptyStats() Stats {
	return Stats{
		PassTime:      newHistogram(PassBuckets()),
		WholePass:     newHistogram(PassBuckets()),
		PhaseSeconds:  make(map[string]float64),
		ExitLag:       newHistogram(LagBuckets()),
		SubmitToStart: make(map[QueueTeam]Histogram),
		QueueWait:     make(map[QueueTeam]Histogram),
		Preempted:     make(map[CauseTeam]int64),
		Reclaimed:     make(map[string]int64),
		RequeuedBy:    make(map[string]int64),
		RetriedBy:     make(map[string]int64),
	}
}

func (st *stats) pass(d time.Duration, starts int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Passes++
	st.s.PassSeconds += d.Seconds()
	st.s.LastPass = d
	st.s.PassTime.observe(d.Seconds())
	st.s.Starts += int64(starts)
}

// wholePass records a whole pass's time by phase.
func (st *stats) wholePass(phases *passPhases) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var total time.Duration
	for i, d := range phases.d {
		st.s.PhaseSeconds[Phases()[i]] += d.Seconds()
		total += d
	}
	st.s.LastWholePass = total
	st.s.WholePass.observe(total.Seconds())
}

// passPhases times the phases of one pass: each mark ends the phase
// that ran since the one before.
type passPhases struct {
	at time.Time
	d  [4]time.Duration
}

func startPhases() *passPhases { return &passPhases{at: time.Now()} }

// mark ends phase i (its index in Phases) now.
func (p *passPhases) mark(i int) {
	now := time.Now()
	p.d[i] += now.Sub(p.at)
	p.at = now
}

// preempted counts a preemption of a job of team; reclaimer is the team
// that takes the GPUs back, empty unless it is a reclaim.
func (st *stats) preempted(team, reclaimer string) {
	st.add(func(s *Stats) {
		s.Preemptions++
		cause := PreemptPriority
		if reclaimer != "" {
			cause = PreemptReclaim
			s.Reclaims++
			s.Reclaimed[reclaimer]++
		}
		s.Preempted[CauseTeam{Cause: cause, Team: team}]++
	})
}

func (st *stats) requeued(cause string) {
	st.add(func(s *Stats) {
		s.Requeues++
		s.RequeuedBy[cause]++
	})
}

func (st *stats) retried(cause string) {
	st.add(func(s *Stats) {
		s.Retries++
		s.RetriedBy[cause]++
	})
}

// started records the waits of a run that starts: first says whether it
// is the job's first run, sinceSubmit its time since submission, and
// waited the time it waited for its GPUs (negative: unknown, as for a
// job that waited again before the server started).
func (st *stats) started(k QueueTeam, first bool, sinceSubmit, waited time.Duration) {
	st.add(func(s *Stats) {
		if first {
			h, ok := s.SubmitToStart[k]
			if !ok {
				h = newHistogram(WaitBuckets())
			}
			h.observe(max(0, sinceSubmit.Seconds()))
			s.SubmitToStart[k] = h
		}
		if waited >= 0 {
			h, ok := s.QueueWait[k]
			if !ok {
				h = newHistogram(WaitBuckets())
			}
			h.observe(waited.Seconds())
			s.QueueWait[k] = h
		}
	})
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

// Stats returns the engine's counters: a copy the caller may keep.
func (e *Engine) Stats() Stats {
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	out := e.stats.s
	out.PassTime = out.PassTime.clone()
	out.WholePass = out.WholePass.clone()
	out.ExitLag = out.ExitLag.clone()
	out.PhaseSeconds = maps.Clone(out.PhaseSeconds)
	out.SubmitToStart = cloneHistograms(out.SubmitToStart)
	out.QueueWait = cloneHistograms(out.QueueWait)
	out.Preempted = maps.Clone(out.Preempted)
	out.Reclaimed = maps.Clone(out.Reclaimed)
	out.RequeuedBy = maps.Clone(out.RequeuedBy)
	out.RetriedBy = maps.Clone(out.RetriedBy)
	return out
}

func cloneHistograms(m map[QueueTeam]Histogram) map[QueueTeam]Histogram {
	out := make(map[QueueTeam]Histogram, len(m))
	for k, h := range m {
		out[k] = h.clone()
	}
	return out
}
