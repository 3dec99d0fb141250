package forecast

import (
	"math"
	"slices"
)

// Outcome is a forecast set against the start that followed it. Times are
// seconds on one clock.
type Outcome struct {
	State                    State
	Earliest, Likely, Latest float64
	// MadeAt is when the forecast was made, Start when the job started.
	MadeAt, Start float64
}

// Within tells whether the start fell in the forecast's range, give or
// take slack seconds (the live engine starts jobs at passes, so a start
// is only known to the pass): between Earliest and Latest for an
// expected start (no Latest: any time after Earliest), after Earliest for
// a later one. A never forecast is never right about a job that started,
// and an unknown one makes no claim.
func (o Outcome) Within(slack float64) bool {
	switch o.State {
	case StateExpected:
		return o.Start >= o.Earliest-slack && (o.Latest == 0 || o.Start <= o.Latest+slack)
	case StateLater:
		return o.Start >= o.Earliest-slack
	}
	return false
}

// Point is the forecast's single best guess of the start: the likely
// start, else the earliest (of an expected forecast whose middle sample
// did not start the job, or of a later one); ok is false for never and
// unknown forecasts, which name no time.
func (o Outcome) Point() (at float64, ok bool) {
	switch {
	case o.State != StateExpected && o.State != StateLater:
		return 0, false
	case o.Likely != 0:
		return o.Likely, true
	case o.Earliest != 0 && !math.IsInf(o.Earliest, 0):
		return o.Earliest, true
	}
	return 0, false
}

// Calibration says how good forecasts have been.
type Calibration struct {
	// Forecasts counts the forecasts of jobs that have since started,
	// unknown ones left out; Unknown counts those left out.
	Forecasts int `json:"forecasts"`
	Unknown   int `json:"unknown"`
	// Within counts those whose start fell in their range, and
	// WithinShare is Within over Forecasts (0 without forecasts).
	Within      int     `json:"within"`
	WithinShare float64 `json:"within_share"`
	// Early and Late count the starts outside their range: before its
	// earliest, after its latest.
	Early int `json:"early"`
	Late  int `json:"late"`
	// Errors counts the forecasts with a point estimate of the start: the
	// likely start, or for one without (a later forecast, an expected one
	// whose middle sample did not start it) the earliest. MedianAbsErrorS,
	// P90AbsErrorS and MeanErrorS are the start less that estimate over
	// them, in seconds (positive: jobs started later than forecast).
	Errors          int     `json:"errors"`
	MedianAbsErrorS float64 `json:"median_abs_error_s"`
	P90AbsErrorS    float64 `json:"p90_abs_error_s"`
	MeanErrorS      float64 `json:"mean_error_s"`
	// MedianRelError is the median of each error over the wait it
	// forecast (the start less the time of the forecast, 1 s at least):
	// 0.2 means off by a fifth of the wait.
	MedianRelError float64 `json:"median_rel_error"`
	// MedianLeadS is the median time from forecast to start: how far
	// ahead the forecasts looked (for a job's first forecast, its wait).
	MedianLeadS float64 `json:"median_lead_s"`
	// NeverStarted counts never forecasts whose job started all the
	// same (a cap raised, a machine added).
	NeverStarted int `json:"never_started"`
}

// Calibrate summarizes outcomes; a start within slack seconds of a range
// counts as within it (Outcome.Within).
func Calibrate(outcomes []Outcome, slack float64) Calibration {
	var c Calibration
	var abs, rel, leads []float64
	sum := 0.0
	for _, o := range outcomes {
		if o.State == StateUnknown || o.State == "" {
			c.Unknown++
			continue
		}
		c.Forecasts++
		leads = append(leads, o.Start-o.MadeAt)
		if o.State == StateNever {
			c.NeverStarted++
		}
		switch {
		case o.Within(slack):
			c.Within++
		case o.State == StateExpected || o.State == StateLater:
			if o.Start < o.Earliest-slack {
				c.Early++
			} else {
				c.Late++
			}
		}
		if at, ok := o.Point(); ok {
			e := o.Start - at
			abs = append(abs, math.Abs(e))
			rel = append(rel, math.Abs(e)/max(o.Start-o.MadeAt, 1))
			sum += e
		}
	}
	if c.Forecasts > 0 {
		c.WithinShare = float64(c.Within) / float64(c.Forecasts)
		c.MedianLeadS = percentile(leads, 50)
	}
	if c.Errors = len(abs); c.Errors > 0 {
		c.MedianAbsErrorS = percentile(abs, 50)
		c.P90AbsErrorS = percentile(abs, 90)
		c.MeanErrorS = sum / float64(len(abs))
		c.MedianRelError = percentile(rel, 50)
	}
	return c
}

// percentile is the p-th percentile of xs by linear interpolation; it
// sorts xs.
func percentile(xs []float64, p float64) float64 {
	slices.Sort(xs)
	return quantile(xs, p/100)
}
