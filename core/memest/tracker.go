package memest

// Tracker follows one job's memory while it runs: it starts from the
// admitted estimate and, once MinSamples peaks were measured, corrects E
// to the padded running average of the ephemeral peaks measured per
// iteration, but never below the largest peak seen, so that a job whose
// peaks vary is not shrunk into exceeding its lane. P is not measured per
// iteration and keeps its admitted value.
//
// The zero Tracker is not ready for use; call NewTracker.
type Tracker struct {
	base    Estimate // unpadded, as admitted
	pad     Padding
	samples int64
	mean    float64 // running average of the ephemeral peaks
	maxPeak int64
}

// NewTracker returns a tracker for a job admitted with estimate e
// (unpadded) and padding p.
func NewTracker(e Estimate, p Padding) *Tracker {
	return &Tracker{base: e, pad: p}
}

// Observe records one iteration's ephemeral peak in MiB. Peaks that are
// not positive are ignored (not measured).
func (t *Tracker) Observe(peakMiB int64) {
	if peakMiB <= 0 {
		return
	}
	t.samples++
	t.mean += (float64(peakMiB) - t.mean) / float64(t.samples)
	t.maxPeak = max(t.maxPeak, peakMiB)
}

// Samples is the number of peaks observed.
func (t *Tracker) Samples() int64 { return t.samples }

// MaxPeakMiB is the largest peak observed, 0 before any.
func (t *Tracker) MaxPeakMiB() int64 { return t.maxPeak }

// MinSamples is how many peaks a Tracker needs before it corrects E: one
// iteration's peak (the first in particular, which may include warm-up
// allocations) is too little to shrink a lane on.
const MinSamples = 3

// Padded is the estimate the job holds now: the admitted estimate
// padded; from MinSamples peaks on, E is the padded running average of
// the peaks or the largest peak, whichever is larger (source Measured).
func (t *Tracker) Padded() Estimate {
	e := t.pad.Apply(t.base)
	if t.samples < MinSamples {
		return e
	}
	e.EphemeralMiB = max(t.pad.ephemeral(e.PersistentMiB, t.mean), t.maxPeak)
	e.Source = Measured
	return e
}

// Requeue is the unpadded estimate to submit the job again with after it
// exceeded its lane: E is the largest of the admitted E, the running
// average and the largest peak, so the job comes back no smaller than
// what it was seen to use.
func (t *Tracker) Requeue() Estimate {
	e := t.base
	e.EphemeralMiB = max(e.EphemeralMiB, t.maxPeak, int64(t.mean+0.999999))
	if t.samples > 0 {
		e.Source = Measured
	}
	return e
}
