package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/models"
)

// forecastMethod says in a few sentences how start times are forecast.
const forecastMethod = "The scheduler is run forward from the cluster as it is, on a virtual clock, " +
	"with each job's run time drawn from the run times of finished jobs (the same user and model first, " +
	"then the user, the model, the team, all), given how long it has run already, and with new jobs " +
	"arriving like the recent ones. This is done several times; the range holds the middle of the starts."

// How many recorded forecasts the calibration figures cover: the most
// recent ones whose job has started since.
const (
	calibrationFirst = 500
	calibrationAll   = 2000
)

// forecastStats says how forecasts are made and how good they have been.
func (s *Server) forecastStats(ctx context.Context) (api.ForecastStats, error) {
	info := s.cfg.Engine.ForecastInfo()
	out := api.ForecastStats{Method: forecastMethod,
		Range: rangeText(info.Range, info.Samples) + ", give or take the " + fmtDuration(s.cfg.Engine.PassInterval()) + " between scheduling passes"}
	first, err := s.cfg.Store.ForecastOutcomes(ctx, "first", calibrationFirst)
	if err != nil {
		return out, err
	}
	all, err := s.cfg.Store.ForecastOutcomes(ctx, "", calibrationAll)
	if err != nil {
		return out, err
	}
	slack := s.cfg.Engine.PassInterval().Seconds()
	out.First, out.All = calibrationOf(forecast.Calibrate(outcomes(first), slack)), calibrationOf(forecast.Calibrate(outcomes(all), slack))
	out.Jobs, out.MedianAbsError, out.P90AbsError, out.MeanError = out.First.Errors, out.First.MedianAbsErrorS, out.First.P90AbsErrorS, out.First.MeanErrorS
	if !info.MadeAt.IsZero() {
		at := info.MadeAt
		out.Latest = &api.ForecastRun{MadeAt: &at, TookMS: float64(info.Took.Microseconds()) / 1000, Passes: info.Passes,
			Jobs: info.Jobs, Truncated: info.Truncated, History: info.History, ArrivalsPerHour: info.ArrivalsPerHour, Samples: info.Samples}
	}
	return out, nil
}

// outcomes are the store's forecast outcomes as forecast.Calibrate takes
// them.
func outcomes(rows []models.ForecastOutcome) []forecast.Outcome {
	out := make([]forecast.Outcome, len(rows))
	for i, o := range rows {
		out[i] = forecast.Outcome{State: forecast.State(o.State), Earliest: o.Earliest, Likely: o.Likely, Latest: o.Latest,
			MadeAt: o.MadeAt, Start: o.Start}
	}
	return out
}

// rangeText says which starts a forecast's range holds.
func rangeText(r [2]float64, samples int) string {
	pct := func(q float64) string { return strconv.FormatFloat(100*q, 'f', -1, 64) }
	return fmt.Sprintf("the %sth to %sth percentile of the starts of %d samples", pct(r[0]), pct(r[1]), samples)
}

func calibrationOf(c forecast.Calibration) api.Calibration {
	return api.Calibration{Forecasts: c.Forecasts, Within: c.Within, WithinShare: c.WithinShare, Unknown: c.Unknown, Errors: c.Errors,
		MedianAbsErrorS: c.MedianAbsErrorS, P90AbsErrorS: c.P90AbsErrorS, MeanErrorS: c.MeanErrorS, MedianRelError: c.MedianRelError,
		MedianLeadS: c.MedianLeadS, NeverStarted: c.NeverStarted}
}

func (s *Server) apiEstimates(c echo.Context) error {
	st, err := s.forecastStats(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// calibrationText says how good forecasts have been, for people: the
// queues page and the job page.
func calibrationText(st api.ForecastStats) string {
	c := st.First
	jobs := c.Forecasts + c.Unknown
	if jobs == 0 {
		return "No forecast has been checked against a start yet."
	}
	// Every job's first forecast shown counts, an unknown one as a miss:
	// the share is of jobs, as a user meets them.
	s := fmt.Sprintf("Of the last %d jobs that waited, %.0f%% started within the range first shown to them", jobs, 100*float64(c.Within)/float64(jobs))
	if c.Unknown > 0 {
		s += fmt.Sprintf(" (%d had no forecast yet)", c.Unknown)
	}
	if c.Errors > 0 {
		bias := "late"
		if c.MeanErrorS < 0 {
			bias = "early"
		}
		s += fmt.Sprintf("; the likely start was off by a median of %s, %.0f%% of the wait (90%% within %s; on average %s %s)",
			fmtDuration(secs(c.MedianAbsErrorS)), 100*c.MedianRelError, fmtDuration(secs(c.P90AbsErrorS)), fmtDuration(secs(abs(c.MeanErrorS))), bias)
	}
	if c.NeverStarted > 0 {
		s += fmt.Sprintf("; %d said never and started all the same (a cap or the cluster changed)", c.NeverStarted)
	}
	if a := st.All; a.Forecasts > c.Forecasts {
		s += fmt.Sprintf(". Counting the forecasts made later in their waits too: %.0f%% of %d within the range", 100*a.WithinShare, a.Forecasts)
	}
	return s + "."
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
