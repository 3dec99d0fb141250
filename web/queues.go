package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/templates"
)

func (s *Server) queues(c echo.Context, p app.QueuePage) (api.Queues, error) {
	return s.app.Queues(c.Request().Context(), appActor(c), p)
}

// queueTopicPage is how many jobs of each queue the queues topic sends
// and the Queues page shows: the rest is read on demand, page by page
// (GET /api/v1/queues?queue=&cursor=, the page's "next" link).
const queueTopicPage = 50

// defaultQueuePage is how many jobs of each queue GET /api/v1/queues
// answers without ?limit=.
const defaultQueuePage = 100

// maxQueuePage bounds ?limit= of GET /api/v1/queues.
const maxQueuePage = 1000

// queuePageParams reads ?queue=, ?offset=, ?cursor= and ?limit= (default
// def); a cursor names its queue.
func queuePageParams(c echo.Context, queues, def int) (app.QueuePage, error) {
	p := app.QueuePage{Queue: -1, Limit: def}
	for _, f := range []struct {
		name string
		dst  *int
		min  int
		max  int
	}{
		{"queue", &p.Queue, 0, queues - 1},
		{"offset", &p.Offset, 0, 1 << 31},
		{"limit", &p.Limit, 1, maxQueuePage},
	} {
		v := c.QueryParam(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < f.min || n > f.max {
			return p, echo.NewHTTPError(http.StatusBadRequest,
				fmt.Sprintf("%s: must be a whole number from %d to %d", f.name, f.min, f.max))
		}
		*f.dst = n
	}
	if v := c.QueryParam("cursor"); v != "" {
		cur, ok := app.ParseQueueCursor(v, queues)
		if !ok || (p.Queue >= 0 && p.Queue != cur.Queue) {
			return p, echo.NewHTTPError(http.StatusBadRequest, "cursor: must be a next_cursor of this server's queues, of the queue named by queue")
		}
		p.Cursor, p.Queue = cur, cur.Queue
	}
	return p, nil
}

// apiQueues returns the queues with their counts and a page of each
// queue's jobs: the first defaultQueuePage of each without parameters;
// ?queue= keeps one queue, ?offset= or ?cursor= (a queue's next_cursor)
// picks its page, ?limit= (at most 1000) its length.
func (s *Server) apiQueues(c echo.Context) error {
	p, err := queuePageParams(c, s.app.QueueCount(), defaultQueuePage)
	if err != nil {
		return err
	}
	p.Only = p.Queue >= 0
	q, err := s.queues(c, p)
	if err != nil {
		return err
	}
	return queuesJSON(c, &q)
}

// queuesJSON answers q as c.JSON does (the same bytes, its newline
// after them), written by api.Queues.AppendJSON rather than by
// reflection; indented (?pretty, or echo's debug mode) or where
// AppendJSON fails, by c.JSON itself.
func queuesJSON(c echo.Context, q *api.Queues) error {
	if _, pretty := c.QueryParams()["pretty"]; !pretty && !c.Echo().Debug {
		if b, err := q.AppendJSON(make([]byte, 0, 64<<10)); err == nil {
			return c.JSONBlob(http.StatusOK, append(b, '\n'))
		}
	}
	return c.JSON(http.StatusOK, q)
}

func (s *Server) jctStats(c echo.Context) (api.JCTStats, error) {
	window := 24 * time.Hour
	if v := c.QueryParam("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return api.JCTStats{}, echo.NewHTTPError(http.StatusBadRequest, "window: must be a duration such as 1h or 24h, at most 720h")
		}
		window = d
	}
	return s.app.JCTStats(c.Request().Context(), window)
}

func (s *Server) apiJCT(c echo.Context) error {
	st, err := s.jctStats(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) queuesView(c echo.Context) (templates.Queues, error) {
	p, err := queuePageParams(c, s.app.QueueCount(), queueTopicPage)
	if err != nil {
		return templates.Queues{}, err
	}
	p.Limit = queueTopicPage
	q, err := s.queues(c, p)
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
		tq := templates.Queue{Index: qu.Index, Range: queueRange(qu), Total: qu.Total, Running: qu.Running,
			From: min(qu.Offset+1, qu.Total), To: qu.Offset + len(qu.Jobs)}
		if qu.NextCursor != "" {
			tq.Next = "/queues?cursor=" + qu.NextCursor
		}
		if qu.Offset > 0 {
			tq.First = "/queues"
		}
		if p.Queue == qu.Index && c.QueryParam("cursor") != "" {
			v.Query = "?cursor=" + url.QueryEscape(c.QueryParam("cursor"))
		}
		for _, j := range qu.Jobs {
			tq.Jobs = append(tq.Jobs, templates.QueueJob{
				ID: j.ID, Name: j.Name, Team: j.Team, User: j.User, GPUs: j.GPUs, State: string(j.State),
				Attained: strconv.FormatFloat(j.AttainedService, 'f', 0, 64), Reason: j.Reason, Visible: j.Name != "",
				Borrowed: j.Borrowed, ETA: j.Forecast.Short(q.AsOf, time.Local), ETAText: j.Forecast.Text(q.AsOf, time.Local),
				Place: placeText(j.Position), Priority: templates.PriorityClass(j.Priority),
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
		v.Forecasts.Latest = fmt.Sprintf("Latest forecast: %d waiting jobs at %s, in %s (%d scheduling passes)",
			l.Jobs, l.MadeAt.Local().Format("15:04:05"), fmtMillis(l.TookMS), l.Passes)
		if l.History != "" { // empty until jobs have finished
			v.Forecasts.Latest += ", from " + l.History
		}
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
