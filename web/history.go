package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/telemetry"
)

// GPU history over longer ranges than the live window: the charts offer
// 10 minutes (per second, from memory) and 1 hour, 24 hours and 7 days
// (from the minute and hour rows of the database; see models/history.go).

// historyRanges are the ranges the charts offer (app.HistoryRange).
var historyRanges = []app.HistoryRange{
	{Name: "10m", Span: historyWindow, Step: 1},
	{Name: "1h", Span: time.Hour, Step: 60},
	{Name: "24h", Span: 24 * time.Hour, Step: 300},
	{Name: "7d", Span: 7 * 24 * time.Hour, Step: 3600},
}

// rangeParam reads ?range=; the default is the live 10 minutes. A
// follower replica holds no live readings (machines connect to the
// leader), so it serves the 10 minutes from the history's minute rows,
// which the leader writes: its charts show the stored minutes, not
// nothing (its pages draw them so: templates.Page.StoredCharts).
func (s *Server) rangeParam(c echo.Context) (app.HistoryRange, error) {
	v := c.QueryParam("range")
	r, ok := historyRanges[0], v == ""
	for _, hr := range historyRanges {
		if hr.Name == v {
			r, ok = hr, true
		}
	}
	if !ok {
		return app.HistoryRange{}, badRequest("range: want 10m, 1h, 24h or 7d, got %q", v)
	}
	if r.Step == 1 && !s.leading() {
		r.Step = 60
	}
	return r, nil
}

// apiGPUHistory returns one GPU's history over ?range=.
func (s *Server) apiGPUHistory(c echo.Context) error {
	r, err := s.rangeParam(c)
	if err != nil {
		return err
	}
	uuid := c.Param("uuid")
	if uuid == "" || len(uuid) > 64 {
		return badRequest("uuid: must be a GPU's UUID")
	}
	hs, err := s.app.GPUHistories(c.Request().Context(), uuid, r)
	if err != nil {
		return err
	}
	if len(hs) == 0 {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no GPU %q connected or in the history", uuid))
	}
	return c.JSON(http.StatusOK, hs[0])
}

// apiGPUsHistory returns every GPU's history over ?range=.
func (s *Server) apiGPUsHistory(c echo.Context) error {
	r, err := s.rangeParam(c)
	if err != nil {
		return err
	}
	hs, err := s.app.GPUHistories(c.Request().Context(), "", r)
	if err != nil {
		return err
	}
	if hs == nil {
		hs = []api.GPUHistory{}
	}
	return c.JSON(http.StatusOK, hs)
}

// clusterHistory sums the GPU history of the cluster over r, with the jobs
// by state. The 10-minute range reads the live window.
func (s *Server) clusterHistory(ctx context.Context, r app.HistoryRange) (api.ClusterHistory, error) {
	out := api.ClusterHistory{Range: r.Name, Step: r.Step, Points: []api.ClusterPoint{}, Jobs: []api.ClusterJobsPoint{}}
	now := s.cfg.Now().Unix()
	from := now - int64(r.Span/time.Second)
	if r.Step == 1 {
		var sum clusterSum
		for _, g := range s.app.ConnectedGPUs() {
			sum.add(s.cfg.Telemetry.GPU(g.Key, from))
		}
		out.Points = sum.points()
	} else {
		from -= from % r.Step
		pts, err := s.app.ClusterGPUPoints(ctx, from, now+1, r.Step)
		if err != nil {
			return out, err
		}
		out.Points = pts
	}
	jobs, err := s.app.ClusterJobPoints(ctx, from-from%60, now+1, max(r.Step, 60))
	if err != nil {
		return out, err
	}
	out.Jobs = jobs
	return out, nil
}

// apiClusterHistory returns the cluster's utilization over ?range=.
func (s *Server) apiClusterHistory(c echo.Context) error {
	r, err := s.rangeParam(c)
	if err != nil {
		return err
	}
	h, err := s.clusterHistory(c.Request().Context(), r)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, h)
}

// jobGPUHistory is the average memory used on the GPUs a job runs on (or
// last ran on) over r, per step, while the job ran
// (app.App.JobGPUHistory).
func (s *Server) jobGPUHistory(ctx context.Context, j *app.Job, r app.HistoryRange) ([]api.JobMemory, error) {
	return s.app.JobGPUHistory(ctx, j, r.Span, r.Step)
}

// clusterSum adds up the readings of the connected GPUs each second: the
// one computation of the cluster's live figures, for GET
// /cluster/history?range=10m and the gpus topic's first frame alike.
type clusterSum map[int64]*api.ClusterPoint

// add counts one GPU's readings.
func (c *clusterSum) add(pts []telemetry.Point) {
	if *c == nil {
		*c = make(clusterSum)
	}
	for _, p := range pts {
		cp := (*c)[p.T]
		if cp == nil {
			cp = &api.ClusterPoint{T: p.T}
			(*c)[p.T] = cp
		}
		cp.GPUs++
		cp.MemUsedMiB += float64(p.MemUsedMiB)
		cp.MemMiB += p.MemMiB
		if p.Busy() {
			cp.BusyGPUs++
		}
	}
}

// points are the sums by time; never nil.
func (c clusterSum) points() []api.ClusterPoint {
	out := make([]api.ClusterPoint, 0, len(c))
	for _, cp := range c {
		out = append(out, *cp)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].T < out[b].T })
	return out
}

// The gpus topic's first frame (api.GPUWall) is bounded: each GPU's
// window in steps of wallStep seconds, the most memory used in each, so
// that a new viewer of 1,000 GPUs is sent under 1 MB; the updates then
// bring every second.
const (
	wallValues = 96_000 // steps of all GPUs together, ~6 bytes each
	wallPoints = 300    // steps of one GPU at most
)

// wallStep is the step of the first frame for n GPUs, in seconds.
func wallStep(n int) int64 {
	w := int64(historyWindow / time.Second)
	return max(ceilDiv(w, wallPoints), ceilDiv(w*int64(n), wallValues), 1)
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// gpuWall is the gpus topic's first frame now.
func (s *Server) gpuWall() api.GPUWall {
	now := s.cfg.Now().Unix()
	since := now - int64(historyWindow/time.Second)
	gpus := s.app.ConnectedGPUs()
	step := wallStep(len(gpus))
	from := since - since%step
	out := api.GPUWall{From: from, Step: step, GPUs: make([]api.GPUWindow, 0, len(gpus))}
	gl := s.app.GPULanes()
	var sum clusterSum
	for _, g := range gpus {
		pts := s.cfg.Telemetry.GPU(g.Key, since)
		sum.add(pts)
		w := api.GPUWindow{UUID: g.Device.UUID, Node: g.Key.Node, Index: g.Key.Index, Model: g.Device.Model,
			UsedMaxMiB: usedMax(pts, from, step, (now-from)/step+1)}
		if len(pts) > 0 {
			p := pointOf(pts[len(pts)-1])
			w.Last = &p
		}
		if l, ok := gl[g.Key]; ok {
			w.Lanes = &l
		}
		out.GPUs = append(out.GPUs, w)
	}
	out.Cluster = sum.points()
	return out
}

// usedMax is the most memory used in each of n steps of step seconds from
// from, nil where there is no reading, up to the last step with one.
func usedMax(pts []telemetry.Point, from, step, n int64) []*int64 {
	vals, out := make([]int64, n), make([]*int64, n)
	last := -1
	for _, p := range pts {
		i := (p.T - from) / step
		if p.T < from || i >= n {
			continue
		}
		if out[i] == nil || p.MemUsedMiB > vals[i] {
			vals[i] = p.MemUsedMiB
			out[i] = &vals[i]
		}
		last = max(last, int(i))
	}
	return out[:last+1]
}
