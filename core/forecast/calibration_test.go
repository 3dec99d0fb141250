package forecast

import (
	"math"
	"testing"
)

func TestCalibrate(t *testing.T) {
	outcomes := []Outcome{
		{State: StateExpected, Earliest: 10, Likely: 20, Latest: 30, MadeAt: 0, Start: 25},   // within, 5 s late
		{State: StateExpected, Earliest: 10, Likely: 20, Latest: 30, MadeAt: 0, Start: 30.5}, // within the slack, 10.5 s late
		{State: StateExpected, Earliest: 10, Likely: 20, Latest: 30, MadeAt: 0, Start: 40},   // outside, 20 s late
		{State: StateExpected, Earliest: 10, Likely: 20, Latest: 0, MadeAt: 0, Start: 1000},  // no later bound: within
		{State: StateExpected, Earliest: 10, Likely: 0, Latest: 0, MadeAt: 0, Start: 5},      // before: outside, no error
		{State: StateLater, Earliest: 100, MadeAt: 0, Start: 150},                            // not before 100: within
		{State: StateNever, MadeAt: 0, Start: 60},                                            // never, started all the same
		{State: StateUnknown, MadeAt: 0, Start: 60},                                          // no claim: left out
	}
	c := Calibrate(outcomes, 1)
	want := Calibration{Forecasts: 7, Within: 4, WithinShare: 4.0 / 7, Errors: 4, NeverStarted: 1,
		MedianAbsErrorS: (10.5 + 20) / 2, MeanErrorS: (5 + 10.5 + 20 + 980) / 4.0, MedianLeadS: 40}
	// |errors| 5, 10.5, 20, 980: the 90th percentile lies between 20 and 980.
	want.P90AbsErrorS = 20 + 0.7*(980-20)
	if math.Abs(c.WithinShare-want.WithinShare) > 1e-9 || math.Abs(c.P90AbsErrorS-want.P90AbsErrorS) > 1e-9 || math.Abs(c.MeanErrorS-want.MeanErrorS) > 1e-9 {
		t.Errorf("calibration %+v\nwant        %+v", c, want)
	}
	c.WithinShare, c.P90AbsErrorS, c.MeanErrorS = want.WithinShare, want.P90AbsErrorS, want.MeanErrorS
	if c != want {
		t.Errorf("calibration %+v\nwant        %+v", c, want)
	}
	if got := Calibrate(outcomes, 0); got.Within != 3 {
		t.Errorf("without slack, %d within; want 3", got.Within)
	}
	if got := Calibrate(nil, 0); got != (Calibration{}) {
		t.Errorf("no outcomes: %+v", got)
	}
}
