package app

import (
	"strconv"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
)

// EngineFigures are what the scheduling engine counted since it started,
// as /metrics sends them: every counter keyed by its labels, those of
// every cause, phase and team present from 0.
type EngineFigures struct {
	Passes, Coalesced, TimedOut, Starts, NodesRemoved, StrayRuns, UnrecordedExits int64
	PassSeconds                                                                   float64
	LastPass                                                                      time.Duration
	// PassTime is the time of each pass inside the scheduling core,
	// WholePass of each whole pass, ExitLag from a run's end to its
	// record.
	PassTime, WholePass, ExitLag Histogram
	// PhaseSeconds is the whole passes' time by phase, in order.
	PhaseSeconds []Labeled
	// Handovers and Releases: starts that waited for a stopping run,
	// runs asked to stop; their seconds in all.
	Handovers, Releases             int64
	HandoverSeconds, ReleaseSeconds float64
	// Preempted counts preemptions by cause and the preempted job's
	// team (Labels: cause, team); Reclaimed by the team that took its
	// GPUs back (Labels: team).
	Preempted, Reclaimed []Labeled
	// RequeuedBy and RetriedBy count requeues and retries by cause.
	RequeuedBy, RetriedBy []Labeled
	// SubmitToStart and QueueWait are, per queue and team (Labels), the
	// time from submission to first start and each run's wait.
	SubmitToStart, QueueWait []LabeledHistogram
}

// Labeled is a figure with its labels' values.
type Labeled struct {
	Labels []string
	V      float64
}

// Histogram is observations counted in buckets, as a Prometheus
// histogram: Buckets maps each upper bound to the observations at or
// under it.
type Histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// LabeledHistogram is a histogram with its labels' values.
type LabeledHistogram struct {
	Labels []string
	H      Histogram
}

func histogramOf(h engine.Histogram) Histogram {
	return Histogram{Count: h.Count, Sum: h.Sum, Buckets: h.Cumulative()}
}

// EngineFigures are the engine's counters now; teams are those whose
// counters start at 0 before any event.
func (s *App) EngineFigures(teams []string) EngineFigures {
	st := s.cfg.Engine.Stats()
	out := EngineFigures{Passes: st.Passes, Coalesced: st.Coalesced, TimedOut: st.TimedOut, Starts: st.Starts,
		NodesRemoved: st.NodesRemoved, StrayRuns: st.StrayRuns, UnrecordedExits: st.UnrecordedExits,
		PassSeconds: st.PassSeconds, LastPass: st.LastPass,
		PassTime: histogramOf(st.PassTime), WholePass: histogramOf(st.WholePass), ExitLag: histogramOf(st.ExitLag),
		Handovers: st.Handovers, Releases: st.Releases, HandoverSeconds: st.HandoverSeconds, ReleaseSeconds: st.ReleaseSeconds}
	for _, p := range engine.Phases() {
		out.PhaseSeconds = append(out.PhaseSeconds, Labeled{Labels: []string{p}, V: st.PhaseSeconds[p]})
	}
	preempted := make(map[engine.CauseTeam]int64, len(st.Preempted))
	reclaimed := make(map[string]int64, len(st.Reclaimed))
	for _, t := range teams {
		for _, cause := range engine.PreemptCauses() {
			preempted[engine.CauseTeam{Cause: cause, Team: t}] = 0
		}
		reclaimed[t] = 0
	}
	for k, v := range st.Preempted {
		preempted[k] = v
	}
	for t, v := range st.Reclaimed {
		reclaimed[t] = v
	}
	for k, v := range preempted {
		out.Preempted = append(out.Preempted, Labeled{Labels: []string{k.Cause, k.Team}, V: float64(v)})
	}
	for t, v := range reclaimed {
		out.Reclaimed = append(out.Reclaimed, Labeled{Labels: []string{t}, V: float64(v)})
	}
	for _, cause := range engine.RequeueCauses() {
		out.RequeuedBy = append(out.RequeuedBy, Labeled{Labels: []string{cause}, V: float64(st.RequeuedBy[cause])})
	}
	for _, cause := range engine.RetryCauses() {
		out.RetriedBy = append(out.RetriedBy, Labeled{Labels: []string{cause}, V: float64(st.RetriedBy[cause])})
	}
	for k, h := range st.SubmitToStart {
		out.SubmitToStart = append(out.SubmitToStart, LabeledHistogram{Labels: []string{strconv.Itoa(k.Queue), k.Team}, H: histogramOf(h)})
	}
	for k, h := range st.QueueWait {
		out.QueueWait = append(out.QueueWait, LabeledHistogram{Labels: []string{strconv.Itoa(k.Queue), k.Team}, H: histogramOf(h)})
	}
	return out
}
