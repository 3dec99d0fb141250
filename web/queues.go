package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/jct"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

func (s *Server) queues(c echo.Context) (api.Queues, error) {
	m, err := s.moment(c.Request().Context())
	if err != nil {
		return api.Queues{}, err
	}
	return s.queuesFor(m, currentUser(c)), nil
}

// queueTopicPage is how many jobs of each queue the queues topic sends:
// the rest is read on demand from GET /api/v1/queues?queue=&offset=.
const queueTopicPage = 50

// maxQueuePage bounds ?limit= of GET /api/v1/queues.
const maxQueuePage = 1000

// queuePage asks for part of the queues: queue -1 is every queue.
type queuePage struct {
	queue, offset, limit int
}

// page keeps of q the jobs p asks for, and of the queues only p's; the
// counts stay those of the whole queues.
func (p queuePage) page(q api.Queues) api.Queues {
	out := q
	out.Queues = make([]api.Queue, 0, len(q.Queues))
	for _, qu := range q.Queues {
		if p.queue >= 0 && qu.Index != p.queue {
			continue
		}
		from := min(p.offset, len(qu.Jobs))
		to := min(from+p.limit, len(qu.Jobs))
		qu.Offset, qu.Jobs = from, qu.Jobs[from:to:to]
		out.Queues = append(out.Queues, qu)
	}
	return out
}

// queuePageParams reads ?queue=, ?offset= and ?limit=; ok is false when
// none is given (the whole queues).
func queuePageParams(c echo.Context, queues int) (queuePage, bool, error) {
	p := queuePage{queue: -1, limit: maxQueuePage}
	given := false
	for _, f := range []struct {
		name string
		dst  *int
		min  int
		max  int
	}{
		{"queue", &p.queue, 0, queues - 1},
		{"offset", &p.offset, 0, 1 << 31},
		{"limit", &p.limit, 1, maxQueuePage},
	} {
		v := c.QueryParam(f.name)
		if v == "" {
			continue
		}
		given = true
		n, err := strconv.Atoi(v)
		if err != nil || n < f.min || n > f.max {
			return p, false, echo.NewHTTPError(http.StatusBadRequest,
				fmt.Sprintf("%s: must be a whole number from %d to %d", f.name, f.min, f.max))
		}
		*f.dst = n
	}
	return p, given, nil
}

// queuesFor is the queues at m as user u may see them: running jobs
// first, then waiting ones in the scheduler's order (their positions:
// what each one's "N jobs ahead" counts), then those of no known
// position (held, or on a follower) by when they entered their queue.
func (s *Server) queuesFor(m *moment, u *models.User) api.Queues {
	sc := s.cfg.Engine.Scheduler()
	cfg := sc.Config()
	out := api.Queues{Policy: cfg.Policy, Thresholds: []float64{}, AsOf: m.now}
	n := sc.Queues()
	if n > 1 {
		out.Thresholds = cfg.Thresholds
	}
	for i := range n {
		q := api.Queue{Index: i, Jobs: []api.QueueJob{}}
		if i > 0 {
			q.From = out.Thresholds[i-1]
		}
		if i < len(out.Thresholds) {
			q.To = out.Thresholds[i]
		}
		out.Queues = append(out.Queues, q)
	}
	js := make([]*models.Job, len(m.unfinished))
	for i := range m.unfinished {
		js[i] = &m.unfinished[i]
	}
	sort.SliceStable(js, func(a, b int) bool {
		ra, rb := js[a].State == job.Running, js[b].State == job.Running
		if ra != rb {
			return ra
		}
		pa, pb := m.position(js[a]), m.position(js[b])
		if (pa > 0) != (pb > 0) {
			return pa > 0
		}
		if pa != pb {
			return pa < pb
		}
		return queueEntry(js[a]) < queueEntry(js[b])
	})
	for _, j := range js {
		qi := min(max(j.QueueIndex, 0), n-1)
		if w, ok := m.waits[j.ID]; ok && m.position(j) > 0 {
			qi = min(max(w.Queue, 0), n-1) // the queue its position counts in
		}
		qu := &out.Queues[qi]
		qu.Jobs = append(qu.Jobs, m.queueJob(j, canSee(u, j.Team)))
		qu.Total++
		if j.State == job.Running {
			qu.Running++
		}
	}
	return out
}

// queueEntry is when a job entered its queue, in the scheduler's seconds.
func queueEntry(j *models.Job) float64 {
	if j.QueueSince > 0 {
		return j.QueueSince
	}
	return float64(j.SubmittedAt.UnixNano()) / 1e9
}

// apiQueues returns the queues: all of them with all their jobs, or, with
// ?queue=, ?offset= or ?limit=, a page of their jobs (?limit= defaults to
// and is at most 1000), as the queues topic's first page is followed.
func (s *Server) apiQueues(c echo.Context) error {
	p, paged, err := queuePageParams(c, s.cfg.Engine.Scheduler().Queues())
	if err != nil {
		return err
	}
	q, err := s.queues(c)
	if err != nil {
		return err
	}
	if paged {
		q = p.page(q)
	}
	return c.JSON(http.StatusOK, q)
}

// maxJCTWindow bounds the window of the JCT figures.
const maxJCTWindow = 30 * 24 * time.Hour

func (s *Server) jctStats(c echo.Context) (api.JCTStats, error) {
	window := 24 * time.Hour
	if v := c.QueryParam("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxJCTWindow {
			return api.JCTStats{}, echo.NewHTTPError(http.StatusBadRequest, "window: must be a duration such as 1h or 24h, at most 720h")
		}
		window = d
	}
	return s.jctStatsFor(c.Request().Context(), window)
}

// jctStatsFor summarizes the JCTs of jobs that ended within window.
func (s *Server) jctStatsFor(ctx context.Context, window time.Duration) (api.JCTStats, error) {
	js, err := s.cfg.Store.FinishedSince(ctx, s.cfg.Now().Add(-window), 100000)
	if err != nil {
		return api.JCTStats{}, err
	}
	jcts := make([]float64, 0, len(js))
	for i := range js {
		jcts = append(jcts, js[i].JCT().Seconds())
	}
	sum := jct.Summarize(jcts)
	out := api.JCTStats{WindowS: window.Seconds(), Jobs: sum.Count, AvgS: sum.Avg, P50S: sum.P50, P95S: sum.P95, P99S: sum.P99, CDF: []api.CDFPoint{}}
	xs, fs := jct.CDF(jcts, 100)
	for i := range xs {
		out.CDF = append(out.CDF, api.CDFPoint{JCTS: xs[i], Fraction: fs[i]})
	}
	return out, nil
}

func (s *Server) apiJCT(c echo.Context) error {
	st, err := s.jctStats(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) queuesView(c echo.Context) (templates.Queues, error) {
	q, err := s.queues(c)
	if err != nil {
		return templates.Queues{}, err
	}
	st, err := s.jctStats(c)
	if err != nil {
		return templates.Queues{}, err
	}
	v := templates.Queues{Policy: q.Policy, JCT: templates.JCTStats{
		Window: fmtDuration(time.Duration(st.WindowS) * time.Second), Jobs: st.Jobs,
		Avg: fmtDuration(secs(st.AvgS)), P50: fmtDuration(secs(st.P50S)), P95: fmtDuration(secs(st.P95S)), P99: fmtDuration(secs(st.P99S)),
	}}
	for _, p := range st.CDF {
		v.JCT.CDF = append(v.JCT.CDF, [2]float64{p.JCTS, p.Fraction})
	}
	for _, qu := range q.Queues {
		tq := templates.Queue{Index: qu.Index, Range: queueRange(qu)}
		for _, j := range qu.Jobs {
			tq.Jobs = append(tq.Jobs, templates.QueueJob{
				ID: j.ID, Name: j.Name, Team: j.Team, User: j.User, GPUs: j.GPUs, State: string(j.State),
				Attained: strconv.FormatFloat(j.AttainedService, 'f', 0, 64), Reason: j.Reason, Visible: j.Name != "",
				Borrowed: j.Borrowed, ETA: j.Forecast.Short(q.AsOf, time.Local), ETAText: j.Forecast.Text(q.AsOf, time.Local),
				Place: placeText(j.Position),
			})
		}
		v.Queues = append(v.Queues, tq)
	}
	fs, err := s.forecastStats(c.Request().Context())
	if err != nil {
		return templates.Queues{}, err
	}
	v.Forecasts = templates.ForecastStats{Calibration: calibrationText(fs), Method: forecastMethod + " The range is " + fs.Range + "."}
	if l := fs.Latest; l != nil {
		v.Forecasts.Latest = fmt.Sprintf("Latest forecast: %d waiting jobs at %s, in %s (%d scheduling passes), from %s",
			l.Jobs, l.MadeAt.Local().Format("15:04:05"), fmtMillis(l.TookMS), l.Passes, l.History)
		if l.ArrivalsPerHour > 0 {
			v.Forecasts.Latest += fmt.Sprintf(", expecting %.0f submissions an hour", l.ArrivalsPerHour)
		}
		if l.Truncated {
			v.Forecasts.Latest += "; it stopped at its budget before every job had started"
		}
		v.Forecasts.Latest += "."
	}
	return v, nil
}

// fmtMillis writes a time in milliseconds as a person reads it.
func fmtMillis(ms float64) string {
	if ms < 10 {
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func queueRange(q api.Queue) string {
	switch {
	case q.From == 0 && q.To == 0:
		return "all jobs"
	case q.To == 0:
		return fmt.Sprintf("%.0f GPU-s and more", q.From)
	default:
		return fmt.Sprintf("%.0f to %.0f GPU-s", q.From, q.To)
	}
}

func (s *Server) queuesPage(c echo.Context) error {
	v, err := s.queuesView(c)
	if err != nil {
		return err
	}
	p := page(c, "Queues", "queues")
	p.Charts = true
	return s.render(c, http.StatusOK, templates.QueuesPage(p, v))
}

func (s *Server) queuesLive(c echo.Context) error {
	v, err := s.queuesView(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.QueuesLive(v))
}

// placeText is a waiting job's place in its queue as the Queues page
// shows it; "" when it has none.
func placeText(pos int) string {
	if pos < 1 {
		return ""
	}
	return strconv.Itoa(pos)
}
