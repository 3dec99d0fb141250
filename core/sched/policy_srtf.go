package sched

import "math"

// The clairvoyant family: srtf and srsf rank by the work a job has left,
// which they read from Job.DurationS, and preempt. A job without a
// duration ranks after every job with one, so it never wins by default.
//
// Declared time limits as hints (Config.LimitsAsHints): a job whose
// duration is unknown but that declared a time limit (Job.TimeLimitS)
// has at most its limit less the time it has run left to do, since it is
// stopped there. Under the knob srtf and srsf rank such a job by that
// bound, as Slurm's backfill plans with limits: users overestimate, so
// the bound is loose, but it still tells a one-hour job from a three-day
// one. docs/scheduling.md, "Declared time limits as hints", measures how
// much of srsf's advantage it recovers.

var srtfPolicy = &policy{
	info: PolicyInfo{Name: "srtf",
		Summary: "shortest remaining time first, preemptive; knows durations",
		Source:  "clairvoyant baseline (Tiresias, Optimus)", Preemptive: true, NeedsDurations: true},
	preempts: true,
	key: func(p *pass, e *entry, j *Job, _ *QueueState, run float64) {
		remainingKey(e, j, run, false, p.sc.cfg.LimitsAsHints)
	},
	rank: func(_ *pass, b []byte, e *entry) []byte { return remainingRank(b, e, " s remaining") },
}

var srsfPolicy = &policy{
	info: PolicyInfo{Name: "srsf",
		Summary: "shortest remaining service (time x GPUs) first, preemptive; knows durations",
		Source:  "clairvoyant baseline of Tiresias (shortest-gpu)", Preemptive: true, NeedsDurations: true},
	preempts: true,
	key: func(p *pass, e *entry, j *Job, _ *QueueState, run float64) {
		remainingKey(e, j, run, true, p.sc.cfg.LimitsAsHints)
	},
	rank: func(_ *pass, b []byte, e *entry) []byte { return remainingRank(b, e, " GPU-s remaining") },
}

// remainingKey is (remaining time, or remaining time x GPUs when
// perGPU; running first; arrival). The remaining time is the known
// duration less the time run; with limits, for a job of unknown duration,
// its time limit less the time run (an upper bound); else unknown, last.
func remainingKey(e *entry, j *Job, run float64, perGPU, limits bool) {
	rem := math.Inf(1)
	switch {
	case j.DurationS > 0:
		rem = max(j.DurationS-j.ExecutedS, 0)
	case limits && j.TimeLimitS > 0:
		rem = max(j.TimeLimitS-j.ExecutedS, 0)
	}
	if perGPU && !math.IsInf(rem, 1) {
		rem *= float64(max(j.GPUs, 1))
	}
	e.k0, e.k1, e.k2 = rem, run, arrival(j)
}

func remainingRank(b []byte, e *entry, unit string) []byte {
	if math.IsInf(e.k0, 1) {
		return append(b, "duration unknown"...)
	}
	b = appendNum(b, e.k0)
	return append(b, unit...)
}
