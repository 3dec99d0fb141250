package web

import (
	"context"
	"math"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/jct"
)

// estimateMethod says in one sentence how start times are estimated.
const estimateMethod = "Running jobs are expected to run for the mean remaining run time of completed jobs that ran at least as long; " +
	"waiting jobs then start in priority order as GPUs free up and hold them for the mean run time. Backfilling and new arrivals are ignored."

// EstimatesJSON says how good start estimates have been: for recently
// started jobs, their start minus their first estimate.
type EstimatesJSON struct {
	Method         string  `json:"method"`
	Jobs           int     `json:"jobs"`
	MedianAbsError float64 `json:"median_abs_error_s"`
	P90AbsError    float64 `json:"p90_abs_error_s"`
	MeanError      float64 `json:"mean_error_s"` // positive: jobs started later than estimated
}

func (s *Server) estimateStats(ctx context.Context) (EstimatesJSON, error) {
	errs, err := s.cfg.Store.EstimateErrors(ctx, 500)
	if err != nil {
		return EstimatesJSON{}, err
	}
	out := EstimatesJSON{Method: estimateMethod, Jobs: len(errs)}
	abs := make([]float64, len(errs))
	sum := 0.0
	for i, e := range errs {
		abs[i] = math.Abs(e)
		sum += e
	}
	if len(errs) > 0 {
		sm := jct.Summarize(abs)
		out.MedianAbsError, out.P90AbsError, out.MeanError = sm.P50, jct.Percentile(abs, 90), sum/float64(len(errs))
	}
	return out, nil
}

func (s *Server) apiEstimates(c echo.Context) error {
	st, err := s.estimateStats(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}
