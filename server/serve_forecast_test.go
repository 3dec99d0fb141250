package server

import (
	"io"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/forecast"
)

// TestServeForecastMaxLoad: --forecast-max-load reaches the engine's
// forecasts, and a value that bounds nothing is refused by name.
func TestServeForecastMaxLoad(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want float64
		err  string
	}{
		{nil, forecast.DefaultMaxLoad, ""},
		{[]string{"--forecast-max-load", "2"}, 2, ""},
		{[]string{"--forecast-max-load", "0.5"}, 0.5, ""},
		{[]string{"--forecast-max-load", "0"}, 0, "--forecast-max-load"},
		{[]string{"--forecast-max-load", "-1"}, 0, "--forecast-max-load"},
		{[]string{"--forecast-max-load", "NaN"}, 0, "--forecast-max-load"},
		{[]string{"--forecast-max-load", "+Inf"}, 0, "--forecast-max-load"},
		{[]string{"--forecast-max-load", "lots"}, 0, "--forecast-max-load"},
	} {
		f, err := parseServeFlags(tc.args, io.Discard)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want one naming %s", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if got := f.forecastConfig().Forecaster.MaxLoad; got != tc.want {
			t.Errorf("%v: the engine's forecasts bound arrivals at %v, want %v", tc.args, got, tc.want)
		}
	}
}
