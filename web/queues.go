package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/jct"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// QueueJSON is one priority queue of the scheduler with its jobs.
type QueueJSON struct {
	Index int `json:"index"`
	// From and To bound the attained service of its jobs (GPU-seconds;
	// seconds for dlas); To is 0 for the last queue.
	From float64        `json:"from"`
	To   float64        `json:"to"`
	Jobs []QueueJobJSON `json:"jobs"`
}

// QueueJobJSON is a job in a queue. Jobs of teams the user may not read
// show no name or user.
type QueueJobJSON struct {
	ID              int64     `json:"id"`
	Name            string    `json:"name,omitempty"`
	Team            string    `json:"team"`
	User            string    `json:"user,omitempty"`
	GPUs            int       `json:"gpus"`
	State           job.State `json:"state"`
	AttainedService float64   `json:"attained_service_gpu_s"`
	Reason          string    `json:"reason,omitempty"`
}

// QueuesJSON is the scheduler's view: its policy, thresholds and queues.
type QueuesJSON struct {
	Policy     string      `json:"policy"`
	Thresholds []float64   `json:"thresholds"`
	Queues     []QueueJSON `json:"queues"`
}

func (s *Server) queues(c echo.Context) (QueuesJSON, error) {
	return s.queuesFor(c.Request().Context(), currentUser(c))
}

// queuesFor is the queues as user u may see them.
func (s *Server) queuesFor(ctx context.Context, u *models.User) (QueuesJSON, error) {
	sc := s.cfg.Engine.Scheduler()
	cfg := sc.Config()
	out := QueuesJSON{Policy: cfg.Policy, Thresholds: []float64{}}
	n := sc.Queues()
	if n > 1 {
		out.Thresholds = cfg.Thresholds
	}
	for i := range n {
		q := QueueJSON{Index: i, Jobs: []QueueJobJSON{}}
		if i > 0 {
			q.From = out.Thresholds[i-1]
		}
		if i < len(out.Thresholds) {
			q.To = out.Thresholds[i]
		}
		out.Queues = append(out.Queues, q)
	}
	js, err := s.cfg.Store.UnfinishedJobs(ctx)
	if err != nil {
		return out, err
	}
	// Running jobs first, then waiting ones by when they entered the queue.
	sort.SliceStable(js, func(a, b int) bool {
		ra, rb := js[a].State == job.Running, js[b].State == job.Running
		if ra != rb {
			return ra
		}
		return queueEntry(&js[a]) < queueEntry(&js[b])
	})
	for i := range js {
		j := &js[i]
		qi := min(max(j.QueueIndex, 0), n-1)
		row := QueueJobJSON{ID: j.ID, Team: j.Team, GPUs: j.GPUs, State: j.State, AttainedService: j.AttainedService}
		if j.State == job.Running && j.LastStartAt != nil {
			row.AttainedService += s.cfg.Now().Sub(*j.LastStartAt).Seconds() * float64(j.GPUs)
		}
		if canSee(u, j.Team) {
			row.Name, row.User, row.Reason = j.Name, j.User, j.Reason
		}
		out.Queues[qi].Jobs = append(out.Queues[qi].Jobs, row)
	}
	return out, nil
}

// queueEntry is when a job entered its queue, in the scheduler's seconds.
func queueEntry(j *models.Job) float64 {
	if j.QueueSince > 0 {
		return j.QueueSince
	}
	return float64(j.SubmittedAt.UnixNano()) / 1e9
}

func (s *Server) apiQueues(c echo.Context) error {
	q, err := s.queues(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, q)
}

// JCTStatsJSON summarizes the JCTs of jobs that ended within a window.
type JCTStatsJSON struct {
	WindowS float64   `json:"window_s"`
	Jobs    int       `json:"jobs"`
	AvgS    float64   `json:"avg_jct_s"`
	P50S    float64   `json:"p50_jct_s"`
	P95S    float64   `json:"p95_jct_s"`
	P99S    float64   `json:"p99_jct_s"`
	CDF     []CDFJSON `json:"cdf"`
}

// CDFJSON is one point of a CDF: the fraction of jobs with a JCT of at most JCTS.
type CDFJSON struct {
	JCTS     float64 `json:"jct_s"`
	Fraction float64 `json:"fraction"`
}

// maxJCTWindow bounds the window of the JCT figures.
const maxJCTWindow = 30 * 24 * time.Hour

func (s *Server) jctStats(c echo.Context) (JCTStatsJSON, error) {
	window := 24 * time.Hour
	if v := c.QueryParam("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxJCTWindow {
			return JCTStatsJSON{}, echo.NewHTTPError(http.StatusBadRequest, "window: must be a duration such as 1h or 24h, at most 720h")
		}
		window = d
	}
	return s.jctStatsFor(c.Request().Context(), window)
}

// jctStatsFor summarizes the JCTs of jobs that ended within window.
func (s *Server) jctStatsFor(ctx context.Context, window time.Duration) (JCTStatsJSON, error) {
	js, err := s.cfg.Store.FinishedSince(ctx, s.cfg.Now().Add(-window), 100000)
	if err != nil {
		return JCTStatsJSON{}, err
	}
	jcts := make([]float64, 0, len(js))
	for i := range js {
		jcts = append(jcts, js[i].JCT().Seconds())
	}
	sum := jct.Summarize(jcts)
	out := JCTStatsJSON{WindowS: window.Seconds(), Jobs: sum.Count, AvgS: sum.Avg, P50S: sum.P50, P95S: sum.P95, P99S: sum.P99, CDF: []CDFJSON{}}
	xs, fs := jct.CDF(jcts, 100)
	for i := range xs {
		out.CDF = append(out.CDF, CDFJSON{JCTS: xs[i], Fraction: fs[i]})
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
			})
		}
		v.Queues = append(v.Queues, tq)
	}
	return v, nil
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func queueRange(q QueueJSON) string {
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
