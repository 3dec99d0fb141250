package sched

import "math"

// The clairvoyant family: srtf and srsf rank by the work a job has left,
// which they read from Job.DurationS, and preempt. A job without a
// duration ranks after every job with one, so it never wins by default.

var srtfPolicy = &policy{
	info: PolicyInfo{Name: "srtf",
		Summary: "shortest remaining time first, preemptive; knows durations",
		Source:  "clairvoyant baseline (Tiresias, Optimus)", Preemptive: true, NeedsDurations: true},
	preempts: true,
	key:      func(_ *pass, e *entry, j *Job, _ *QueueState, run float64) { remainingKey(e, j, run, false) },
	rank:     func(_ *pass, b []byte, e *entry) []byte { return remainingRank(b, e, " s remaining") },
}

var srsfPolicy = &policy{
	info: PolicyInfo{Name: "srsf",
		Summary: "shortest remaining service (time x GPUs) first, preemptive; knows durations",
		Source:  "clairvoyant baseline of Tiresias (shortest-gpu)", Preemptive: true, NeedsDurations: true},
	preempts: true,
	key:      func(_ *pass, e *entry, j *Job, _ *QueueState, run float64) { remainingKey(e, j, run, true) },
	rank:     func(_ *pass, b []byte, e *entry) []byte { return remainingRank(b, e, " GPU-s remaining") },
}

// remainingKey is (remaining time, or remaining time x GPUs when
// perGPU; running first; arrival).
func remainingKey(e *entry, j *Job, run float64, perGPU bool) {
	rem := math.Inf(1)
	if j.DurationS > 0 {
		rem = max(j.DurationS-j.ExecutedS, 0)
		if perGPU {
			rem *= float64(max(j.GPUs, 1))
		}
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
