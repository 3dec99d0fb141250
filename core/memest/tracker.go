package memest

// Tracker follows one job's memory while it runs: it starts from the
// admitted estimate and, once MinSamples peaks were measured, corrects E
// to the padded running average of the ephemeral peaks measured per
// iteration. P is not measured per iteration and keeps its admitted
// value.
//
// The correction never takes E below a floor, the largest of:
//   - the largest peak seen, so that a job whose peaks vary is not shrunk
//     into exceeding its lane;
//   - the largest E the job asked for before an iteration (Expect): what
//     a job declares it needs is honoured, or its next ask would exceed
//     the lane it was shrunk to, and the job would be stopped for it;
//   - the admitted E when that estimate was itself measured (source
//     Measured, from an earlier run): it holds that run's largest peak.
//
// The zero Tracker is not ready for use; call NewTracker.
type Tracker struct {
	base    Estimate // unpadded, as admitted
	pad     Padding
	samples int64
	mean    float64 // running average of the ephemeral peaks
	maxPeak int64
	maxAsk  int64 // the largest E asked for before an iteration
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

// Expect records the ephemeral memory in MiB the job says its next
// iteration needs; 0 (not said) changes nothing. E is never corrected
// below the largest such ask.
func (t *Tracker) Expect(mib int64) {
	t.maxAsk = max(t.maxAsk, mib)
}

// Samples is the number of peaks observed.
func (t *Tracker) Samples() int64 { return t.samples }

// MaxPeakMiB is the largest peak observed, 0 before any.
func (t *Tracker) MaxPeakMiB() int64 { return t.maxPeak }

// MaxAskMiB is the largest E the job asked for (Expect), 0 before any.
func (t *Tracker) MaxAskMiB() int64 { return t.maxAsk }

// MinSamples is how many peaks a Tracker needs before it corrects E: one
// iteration's peak (the first in particular, which may include warm-up
// allocations) is too little to shrink a lane on.
const MinSamples = 3

// Padded is the estimate the job holds now: the admitted estimate
// padded; from MinSamples peaks on, E is the padded running average of
// the peaks, but no less than the floor (see Tracker), source Measured.
func (t *Tracker) Padded() Estimate {
	e := t.pad.Apply(t.base)
	if t.samples < MinSamples {
		e.EphemeralMiB = max(e.EphemeralMiB, t.maxAsk)
		return e
	}
	e.EphemeralMiB = max(t.pad.ephemeral(e.PersistentMiB, t.mean), t.floor())
	e.Source = Measured
	return e
}

// floor is the least E a correction may give (see Tracker).
func (t *Tracker) floor() int64 {
	f := max(t.maxPeak, t.maxAsk)
	if t.base.Source == Measured {
		f = max(f, t.base.EphemeralMiB)
	}
	return f
}

// Requeue is the unpadded estimate to submit the job again with after it
// outgrew its lane: E is the largest of the admitted E, the running
// average, the largest peak and the largest ask, so the job comes back
// no smaller than what it was seen to use or said it needs. The source
// is Measured once a peak was measured.
func (t *Tracker) Requeue() Estimate {
	e := t.base
	e.EphemeralMiB = max(e.EphemeralMiB, t.maxPeak, t.maxAsk, int64(t.mean+0.999999))
	if t.samples > 0 {
		e.Source = Measured
	}
	return e
}
