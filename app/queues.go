package app

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/jct"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// The queues, the JCT figures and the forecasts' calibration: what every
// signed-in user may read, each job of another team without its name,
// its user and its reason.

// QueuePage asks for part of the queues: at most Limit jobs of each
// queue from Offset (of Queue alone when Queue is not -1), or, with a
// Cursor, of the cursor's queue right after the job the cursor names and
// of the others from their start. Only keeps the queues other than Queue
// out (the API's ?queue=); their counts are in either way.
type QueuePage struct {
	Queue, Offset, Limit int
	Cursor               QueueCursor
	Only                 bool
}

// QueueCursor names where a page of a queue ends: the last job shown and
// how many jobs of the queue were shown up to it. The next page starts
// right after that job where it is now, so that no job is lost or
// repeated while jobs are submitted, start or leave ahead of it; if it
// left the queue, at the same count from the queue's start.
type QueueCursor struct {
	Queue  int
	After  int64
	Offset int
}

// String is the cursor as ?cursor= carries it: "queue.after.offset".
func (c QueueCursor) String() string {
	return fmt.Sprintf("%d.%d.%d", c.Queue, c.After, c.Offset)
}

// ParseQueueCursor reads a cursor of one of queues queues.
func ParseQueueCursor(v string, queues int) (QueueCursor, bool) {
	var c QueueCursor
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return c, false
	}
	var err [3]error
	c.Queue, err[0] = strconv.Atoi(parts[0])
	c.After, err[1] = strconv.ParseInt(parts[1], 10, 64)
	c.Offset, err[2] = strconv.Atoi(parts[2])
	if err[0] != nil || err[1] != nil || err[2] != nil || c.Queue < 0 || c.Queue >= queues || c.After <= 0 || c.Offset < 0 {
		return c, false
	}
	return c, true
}

// from is where the page of queue qi starts in rows, the queue in order.
func (p QueuePage) from(qi int, rows []*models.QueueRow) int {
	if p.Queue >= 0 && p.Queue != qi {
		return 0
	}
	if p.Cursor.After > 0 {
		for i, r := range rows {
			if r.ID == p.Cursor.After {
				return i + 1
			}
		}
		return min(p.Cursor.Offset, len(rows))
	}
	return min(p.Offset, len(rows))
}

// queueOrder places m's unfinished jobs in n queues, in the one order
// every screen shows: running jobs first, then waiting ones in the
// scheduler's order (their positions: what each one's "N jobs ahead"
// counts), then those of no known position (held, or on a follower) by
// when they entered their queue. It reads QueueRows only.
// The order is kept between the moments of the same rows and places
// (orderCache): read it, do not change it.
func (m *Moment) queueOrder(n int) [][]*models.QueueRow {
	if m.orders == nil {
		return m.placeQueues(n)
	}
	order, _ := m.orders.get(m.queued, m.Waits, n, func() [][]*models.QueueRow { return m.placeQueues(n) }, false)
	return order
}

// placeQueues computes queueOrder.
func (m *Moment) placeQueues(n int) [][]*models.QueueRow {
	return models.OrderQueues(m.queued, n, func(r *models.QueueRow) (int, int) {
		if w, ok := m.Waits[r.ID]; ok && w.Position > 0 && r.State.Waiting() && !r.Held() {
			return w.Queue, w.Position // the queue its position counts in
		}
		return r.QueueIndex, 0
	})
}

// Queues is the queues now as a may see them (QueuesAt).
func (s *App) Queues(ctx context.Context, a Actor, p QueuePage) (api.Queues, error) {
	m, err := s.Moment(ctx)
	if err != nil {
		return api.Queues{}, err
	}
	return s.QueuesAt(ctx, m, a, p)
}

// QueuePlace is an unfinished job's queue, in queueOrder.
type QueuePlace struct {
	ID    int64
	Queue int
}

// TeamQueue returns the first limit of team's unfinished jobs in
// queueOrder over n queues, queue by queue, and how many it has in all.
func (m *Moment) TeamQueue(team string, n, limit int) (first []QueuePlace, total int) {
	var places []QueuePlace
	if m.orders == nil {
		places = teamPlaces(m.placeQueues(n))[team]
	} else {
		_, teams := m.orders.get(m.queued, m.Waits, n, func() [][]*models.QueueRow { return m.placeQueues(n) }, true)
		places = teams[team]
	}
	return slices.Clone(places[:min(limit, len(places))]), len(places)
}

// teamPlaces are each team's jobs of order, in order.
func teamPlaces(order [][]*models.QueueRow) map[string][]QueuePlace {
	out := make(map[string][]QueuePlace)
	for qi, rows := range order {
		for _, r := range rows {
			out[r.Team] = append(out[r.Team], QueuePlace{ID: r.ID, Queue: qi})
		}
	}
	return out
}

// QueuesAt is the queues at m as a may see them, in queueOrder, each
// with its counts and the page p asks for: only the jobs of those pages
// are read whole and converted; another team's job shows without its
// name, user and reason.
func (s *App) QueuesAt(ctx context.Context, m *Moment, a Actor, p QueuePage) (api.Queues, error) {
	sc := s.cfg.Engine.Scheduler()
	cfg := sc.Config()
	out := api.Queues{Policy: cfg.Policy, Thresholds: []float64{}, AsOf: m.Now}
	n := sc.Queues()
	if n > 1 {
		out.Thresholds = cfg.Thresholds
	}
	order := m.queueOrder(n)
	var ids []int64
	for i := range n {
		q := api.Queue{Index: i, Jobs: []api.QueueJob{}, Total: len(order[i])}
		if i > 0 {
			q.From = out.Thresholds[i-1]
		}
		if i < len(out.Thresholds) {
			q.To = out.Thresholds[i]
		}
		for _, r := range order[i] {
			if r.State != job.Running {
				break // running jobs come first
			}
			q.Running++
		}
		if p.Only && i != p.Queue {
			continue
		}
		from := p.from(i, order[i])
		to := min(from+p.Limit, len(order[i]))
		q.Offset = from
		if to < len(order[i]) {
			q.NextCursor = QueueCursor{Queue: i, After: order[i][to-1].ID, Offset: to}.String()
		}
		for _, r := range order[i][from:to] {
			ids = append(ids, r.ID)
		}
		out.Queues = append(out.Queues, q)
	}
	js, err := s.cfg.Store.QueueJobsByID(ctx, ids)
	if err != nil {
		return api.Queues{}, stored(err)
	}
	byID := make(map[int64]*models.Job, len(js))
	for i := range js {
		byID[js[i].ID] = &js[i]
	}
	for k := range out.Queues {
		qu := &out.Queues[k]
		rows := order[qu.Index]
		page := rows[qu.Offset:min(qu.Offset+p.Limit, len(rows))]
		if len(page) > 0 {
			qu.Jobs = make([]api.QueueJob, 0, len(page))
		}
		for _, r := range page {
			if j, ok := byID[r.ID]; ok { // gone since the rows were read: left out
				qu.Jobs = append(qu.Jobs, m.queueJob(j, CanSee(a.User, j.Team)))
			}
		}
	}
	return out, nil
}

// MaxJCTWindow bounds the window of the JCT figures.
const MaxJCTWindow = 30 * 24 * time.Hour

// JCTStats summarizes the JCTs of the jobs that ended within window.
func (s *App) JCTStats(ctx context.Context, window time.Duration) (api.JCTStats, error) {
	if window <= 0 || window > MaxJCTWindow {
		return api.JCTStats{}, invalid("window", "window: must be a duration such as 1h or 24h, at most 720h")
	}
	jcts, err := s.cfg.Store.JCTsSince(ctx, s.cfg.Now().Add(-window), 100000)
	if err != nil {
		return api.JCTStats{}, stored(err)
	}
	sum := jct.Summarize(jcts)
	out := api.JCTStats{WindowS: window.Seconds(), Jobs: sum.Count, AvgS: sum.Avg, P50S: sum.P50, P95S: sum.P95, P99S: sum.P99, CDF: []api.CDFPoint{}}
	xs, fs := jct.CDF(jcts, 100)
	for i := range xs {
		out.CDF = append(out.CDF, api.CDFPoint{JCTS: xs[i], Fraction: fs[i]})
	}
	return out, nil
}

// ForecastMethod says in a few sentences how start times are forecast.
const ForecastMethod = "The scheduler is run forward from the cluster as it is, on a virtual clock, " +
	"with each job's run time drawn from how finished jobs ran, given how long it has run already: " +
	"for a job with a time limit, the shares of their limits that finished jobs used (before 3 jobs have finished, " +
	"any share of its limit alike); else the run times of finished jobs (the same user and model first, " +
	"then the user, the model, the team, all); and with new jobs " +
	"arriving like the recent ones. This is done several times; the range holds the middle of the starts."

// How many recorded forecasts the calibration figures cover: the most
// recent ones whose job has started since.
const (
	calibrationFirst = 500
	calibrationAll   = 2000
)

// ForecastStats says how forecasts are made and how good they have been.
func (s *App) ForecastStats(ctx context.Context) (api.ForecastStats, error) {
	info := s.cfg.Engine.ForecastInfo()
	out := api.ForecastStats{Method: ForecastMethod,
		Range: rangeText(info.Range, info.Samples) + ", give or take the " + FormatDuration(s.cfg.Engine.PassInterval()) + " between scheduling passes"}
	first, err := s.cfg.Store.ForecastOutcomes(ctx, "first", calibrationFirst)
	if err != nil {
		return out, stored(err)
	}
	all, err := s.cfg.Store.ForecastOutcomes(ctx, "", calibrationAll)
	if err != nil {
		return out, stored(err)
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

// FormatDuration writes d as a person reads it: 42s, 3m05s, 2h04m.
func FormatDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
