package api

import (
	"strconv"
	"time"
)

// The states of a Forecast.
const (
	// ForecastExpected: the job starts between Earliest and Latest, most
	// likely at Likely. No Latest: the forecast found no later bound (the
	// job may be overtaken for long); no Likely: it did not start in
	// most of the forecast's samples.
	ForecastExpected = "expected"
	// ForecastLater: the job did not start within the forecast's reach;
	// it starts after Earliest, if at all.
	ForecastLater = "later"
	// ForecastNever: the job cannot start while the cluster, its team's
	// caps and its user's are as they are; Reason says why.
	ForecastNever = "never"
	// ForecastHeld: the job is held (its reason says why and until when).
	ForecastHeld = "held"
	// ForecastUnknown: no forecast could be made; Reason says why.
	ForecastUnknown = "unknown"
)

// Forecast is when a waiting job is expected to start: one forecast,
// made by the engine for every waiting job (docs/forecast.md), that the
// job's page, the jobs list, the queues, the API and the CLI all show.
type Forecast struct {
	State    string     `json:"state"`
	Earliest *time.Time `json:"earliest"`
	Likely   *time.Time `json:"likely"`
	Latest   *time.Time `json:"latest"`
	Reason   string     `json:"reason,omitempty"`
	// MadeAt is when the forecast was made; null when none was.
	MadeAt *time.Time `json:"made_at"`
}

// Calibration says how forecasts made at one point of jobs' waits did
// against the starts that followed them (core/forecast.Calibrate).
type Calibration struct {
	// Forecasts counts the forecasts compared; Within those whose start
	// fell in their range, and WithinShare is Within over Forecasts.
	Forecasts   int     `json:"forecasts"`
	Within      int     `json:"within"`
	WithinShare float64 `json:"within_share"`
	// Unknown counts the unknown forecasts (no range shown) of jobs that
	// started since; they are not among Forecasts.
	Unknown int `json:"unknown"`
	// MedianAbsErrorS, P90AbsErrorS and MeanErrorS compare the start with
	// the likely start (the earliest where there is none), over the Errors
	// forecasts that had one (positive mean: jobs started later than
	// forecast); MedianRelError is the median of each error over the wait
	// it forecast.
	Errors          int     `json:"errors"`
	MedianAbsErrorS float64 `json:"median_abs_error_s"`
	P90AbsErrorS    float64 `json:"p90_abs_error_s"`
	MeanErrorS      float64 `json:"mean_error_s"`
	MedianRelError  float64 `json:"median_rel_error"`
	// MedianLeadS is the median time from forecast to start.
	MedianLeadS float64 `json:"median_lead_s"`
	// NeverStarted counts forecasts of never whose job started anyway.
	NeverStarted int `json:"never_started"`
}

// ForecastRun describes the latest forecast: when, at what cost, from
// what.
type ForecastRun struct {
	MadeAt *time.Time `json:"made_at"`
	// TookMS is its time on the server; Passes the scheduling passes it
	// ran over all its samples.
	TookMS float64 `json:"took_ms"`
	Passes int     `json:"passes"`
	// Jobs counts the waiting jobs it forecast.
	Jobs int `json:"jobs"`
	// Truncated: it stopped at its budget with jobs not yet started.
	Truncated bool `json:"truncated"`
	// History says what run times it drew from; ArrivalsPerHour the
	// submissions it expected (0: none).
	History         string  `json:"history"`
	ArrivalsPerHour float64 `json:"arrivals_per_hour"`
	Samples         int     `json:"samples"`
}

// ForecastStats is GET /api/v1/stats/estimates: how the forecasts are
// made and how good they have been.
type ForecastStats struct {
	Method string `json:"method"`
	// Range says which starts a forecast's range holds.
	Range string `json:"range"`
	// First compares each job's first forecast with its start; All every
	// recorded forecast (the first, and those at 1 min, 5 min, 15 min,
	// 1 h and 4 h into its wait) with the start that followed it.
	First Calibration `json:"first"`
	All   Calibration `json:"all"`
	// Latest is the latest forecast; null before the first.
	Latest *ForecastRun `json:"latest"`
	// Jobs, MedianAbsError, P90AbsError and MeanError repeat First's
	// figures under their former names.
	Jobs           int     `json:"jobs"`
	MedianAbsError float64 `json:"median_abs_error_s"`
	P90AbsError    float64 `json:"p90_abs_error_s"`
	MeanError      float64 `json:"mean_error_s"`
}

// Expected is the one time that stands for the forecast where a single
// start is shown (squeue's expected start, %S): the likely start, else
// the earliest of an expected or later forecast; nil for one that
// expects no start (never, held, unknown).
func (f *Forecast) Expected() *time.Time {
	switch {
	case f == nil || f.State != ForecastExpected && f.State != ForecastLater:
		return nil
	case f.Likely != nil:
		return f.Likely
	}
	return f.Earliest
}

// Text says the forecast in a sentence, with times in loc, as of now:
// what the job page and `gpuportal job show` print.
func (f *Forecast) Text(now time.Time, loc *time.Location) string {
	if f == nil {
		return ""
	}
	at := func(t *time.Time) string { return Clock(*t, now, loc) }
	in := func(t *time.Time) string { return "in " + roughDuration(t.Sub(now)) }
	switch f.State {
	case ForecastExpected:
		switch {
		case f.Latest != nil && !f.Latest.After(now.Add(2*time.Second)):
			return "now: it starts at the next pass"
		case f.Latest != nil && (f.Earliest.Equal(*f.Latest) || at(f.Earliest) == at(f.Latest)):
			// A range that reads as one time ("between 02:09:45 and
			// 02:09:46 (in 14s to 14s)") is said as one.
			return "at " + at(f.Latest) + " (" + in(f.Latest) + ")"
		case f.Latest != nil:
			s := "between " + at(f.Earliest) + " and " + at(f.Latest) + " (" + in(f.Earliest)
			if to := roughDuration(f.Latest.Sub(now)); to != roughDuration(f.Earliest.Sub(now)) {
				s += " to " + to
			}
			s += ")"
			if f.Likely != nil {
				s += ", likely " + at(f.Likely)
			}
			return s
		case f.Likely != nil:
			return "after " + at(f.Earliest) + ", likely " + at(f.Likely) + " (" + in(f.Likely) + "); no later bound: jobs submitted later may overtake it"
		}
		return "after " + at(f.Earliest) + " (" + in(f.Earliest) + "), perhaps much later: in most of the forecast's samples jobs submitted later overtook it"
	case ForecastLater:
		return "not before " + at(f.Earliest) + " (" + in(f.Earliest) + "): " + f.Reason
	case ForecastNever:
		return "never: " + f.Reason
	case ForecastHeld:
		return "never while held (its reason says until when)"
	}
	if f.Reason != "" {
		return "unknown: " + f.Reason
	}
	return "unknown"
}

// Short says the forecast in a few characters, for a column: "now",
// "14:05–14:40", "after 14:05", "≥ 16:00", "never", "held", "?".
func (f *Forecast) Short(now time.Time, loc *time.Location) string {
	if f == nil {
		return ""
	}
	at := func(t *time.Time) string { return Clock(*t, now, loc) }
	switch f.State {
	case ForecastExpected:
		switch {
		case f.Latest != nil && !f.Latest.After(now.Add(2*time.Second)):
			return "now"
		case f.Latest != nil && (f.Earliest.Equal(*f.Latest) || at(f.Earliest) == at(f.Latest)):
			return at(f.Latest)
		case f.Latest != nil:
			return at(f.Earliest) + "–" + at(f.Latest)
		}
		return "after " + at(f.Earliest)
	case ForecastLater:
		return "≥ " + at(f.Earliest)
	case ForecastNever:
		return "never"
	case ForecastHeld:
		return "held"
	}
	return "?"
}

// Clock writes t as a time of day in loc, with the date when t is not on
// now's day.
func Clock(t, now time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.Local
	}
	t, now = t.In(loc), now.In(loc)
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format("15:04:05")
	}
	return t.Format("Jan 2 15:04")
}

// roughDuration writes d to two units at most: 45s, 3m20s, 2h05m, 3d4h.
func roughDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return itoa(s) + "s"
	case s < 3600:
		return itoa(s/60) + "m" + pad(s%60) + "s"
	case s < 86400:
		return itoa(s/3600) + "h" + pad(s%3600/60) + "m"
	}
	return itoa(s/86400) + "d" + itoa(s%86400/3600) + "h"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func pad(n int64) string {
	if n < 10 {
		return "0" + itoa(n)
	}
	return itoa(n)
}
