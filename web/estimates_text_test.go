package web

import (
	"testing"

	"github.com/gpuportal/gpuportal/api"
)

// TestCalibrationText: the forecasts' record reads as English for one
// job and for several, and a record with no range to check (every job's
// first forecast unknown) says so rather than "0% started within the
// range".
func TestCalibrationText(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    api.Calibration
		want string
	}{
		{"none yet", api.Calibration{}, "No forecast has been checked against a start yet."},
		{"one job without a forecast", api.Calibration{Unknown: 1},
			"No forecast has been checked against a start yet: the last job that waited had no forecast (run times were not known yet)."},
		{"three jobs without a forecast", api.Calibration{Unknown: 3},
			"No forecast has been checked against a start yet: the last 3 jobs that waited had no forecast (run times were not known yet)."},
		{"one job in its range", api.Calibration{Forecasts: 1, Within: 1},
			"Of the last job that waited, 100% started within the range first shown to it."},
		{"four jobs, one without a forecast", api.Calibration{Forecasts: 3, Within: 2, Unknown: 1},
			"Of the last 4 jobs that waited, 50% started within the range first shown to them (1 had no forecast yet)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := calibrationText(api.ForecastStats{First: tc.c}); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
