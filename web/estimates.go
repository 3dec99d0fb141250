package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
)

// forecastMethod says in a few sentences how start times are forecast.
const forecastMethod = app.ForecastMethod

// forecastStats says how forecasts are made and how good they have been
// (app.App.ForecastStats).
func (s *Server) forecastStats(ctx context.Context) (api.ForecastStats, error) {
	return s.app.ForecastStats(ctx)
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
	waited, them := fmt.Sprintf("last %d jobs", jobs), "them"
	if jobs == 1 {
		waited, them = "last job", "it"
	}
	if c.Forecasts == 0 {
		// No range to check a start against: "0% started within the
		// range" would blame ranges never shown.
		return fmt.Sprintf("No forecast has been checked against a start yet: the %s that waited had no forecast (run times were not known yet).", waited)
	}
	// Every job's first forecast shown counts, an unknown one as a miss:
	// the share is of jobs, as a user meets them.
	s := fmt.Sprintf("Of the %s that waited, %.0f%% started within the range first shown to %s", waited, 100*float64(c.Within)/float64(jobs), them)
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
