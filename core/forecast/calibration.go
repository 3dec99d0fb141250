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

// Calibration says how good forecasts have been.
type Calibration struct {
	// Forecasts counts the forecasts of jobs that have since started,
	// unknown ones left out.
	Forecasts int `json:"forecasts"`
	// Within counts those whose start fell in their range, and
	// WithinShare is Within over Forecasts (0 without forecasts).
	Within      int     `json:"within"`
	WithinShare float64 `json:"within_share"`
	// Errors counts the forecasts with a likely start; MedianAbsErrorS,
	// P90AbsErrorS and MeanErrorS are the start less the likely start
	// over them, in seconds (positive: jobs started later than likely).
	Errors          int     `json:"errors"`
	MedianAbsErrorS float64 `json:"median_abs_error_s"`
	P90AbsErrorS    float64 `json:"p90_abs_error_s"`
	MeanErrorS      float64 `json:"mean_error_s"`
	// MedianLeadS is the median time from forecast to start: how far
	// ahead the forecasts looked.
	MedianLeadS float64 `json:"median_lead_s"`
	// NeverStarted counts never forecasts whose job started all the
	// same (a cap raised, a machine added).
	NeverStarted int `json:"never_started"`
}

// Calibrate summarizes outcomes; a start within slack seconds of a range
// counts as within it (Outcome.Within).
func Calibrate(outcomes []Outcome, slack float64) Calibration {
	var c Calibration
	var abs, leads []float64
	sum := 0.0
	for _, o := range outcomes {
		if o.State == StateUnknown || o.State == "" {
			continue
		}
		c.Forecasts++
		leads = append(leads, o.Start-o.MadeAt)
		if o.State == StateNever {
			c.NeverStarted++
		}
		if o.Within(slack) {
			c.Within++
		}
		if o.State == StateExpected && o.Likely != 0 {
			e := o.Start - o.Likely
			abs = append(abs, math.Abs(e))
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
	}
	return c
}

// percentile is the p-th percentile of xs by linear interpolation; it
// sorts xs.
func percentile(xs []float64, p float64) float64 {
	slices.Sort(xs)
	return quantile(xs, p/100)
}
