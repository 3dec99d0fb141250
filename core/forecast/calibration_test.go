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
		{State: StateExpected, Earliest: 10, Likely: 0, Latest: 0, MadeAt: 0, Start: 5},      // before: early, 5 s from the earliest
		{State: StateLater, Earliest: 100, MadeAt: 0, Start: 150},                            // not before 100: within, 50 s from the earliest
		{State: StateNever, MadeAt: 0, Start: 60},                                            // never, started all the same
		{State: StateUnknown, MadeAt: 0, Start: 60},                                          // no claim: left out
	}
	c := Calibrate(outcomes, 1)
	want := Calibration{Forecasts: 7, Unknown: 1, Within: 4, WithinShare: 4.0 / 7, Early: 1, Late: 1, Errors: 6, NeverStarted: 1,
		MedianAbsErrorS: (10.5 + 20) / 2, MeanErrorS: (5 + 10.5 + 20 + 980 - 5 + 50) / 6.0, MedianLeadS: 40}
	// |errors| 5, 5, 10.5, 20, 50, 980: the 90th percentile lies between
	// 50 and 980.
	want.P90AbsErrorS = 50 + 0.5*(980-50)
	// Over their waits: 5/25, 10.5/30.5, 20/40, 980/1000, 5/5, 50/150.
	want.MedianRelError = (10.5/30.5 + 20.0/40) / 2
	if math.Abs(c.WithinShare-want.WithinShare) > 1e-9 || math.Abs(c.P90AbsErrorS-want.P90AbsErrorS) > 1e-9 ||
		math.Abs(c.MeanErrorS-want.MeanErrorS) > 1e-9 || math.Abs(c.MedianRelError-want.MedianRelError) > 1e-9 {
		t.Errorf("calibration %+v\nwant        %+v", c, want)
	}
	c.WithinShare, c.P90AbsErrorS, c.MeanErrorS, c.MedianRelError = want.WithinShare, want.P90AbsErrorS, want.MeanErrorS, want.MedianRelError
	if c != want {
		t.Errorf("calibration %+v\nwant        %+v", c, want)
	}
	if got := Calibrate(outcomes, 0); got.Within != 3 || got.Late != 2 {
		t.Errorf("without slack, %d within and %d late; want 3 and 2", got.Within, got.Late)
	}
	if got := Calibrate(nil, 0); got != (Calibration{}) {
		t.Errorf("no outcomes: %+v", got)
	}
}
