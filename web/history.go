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

// rangeParam reads ?range=; the default is the live 10 minutes.
func rangeParam(c echo.Context) (app.HistoryRange, error) {
	v := c.QueryParam("range")
	if v == "" {
		return historyRanges[0], nil
	}
	for _, r := range historyRanges {
		if r.Name == v {
			return r, nil
		}
	}
	return app.HistoryRange{}, badRequest("range: want 10m, 1h, 24h or 7d, got %q", v)
}

// apiGPUHistory returns one GPU's history over ?range=.
func (s *Server) apiGPUHistory(c echo.Context) error {
	r, err := rangeParam(c)
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
	r, err := rangeParam(c)
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
		byT := make(map[int64]*api.ClusterPoint)
		for _, sr := range s.gpuHistory(from) {
			for _, p := range sr.Points {
				cp := byT[p.T]
				if cp == nil {
					cp = &api.ClusterPoint{T: p.T}
					byT[p.T] = cp
				}
				cp.GPUs++
				cp.MemUsedMiB += float64(p.MemUsedMiB)
				cp.MemMiB += p.MemMiB
				if len(p.Held) > 0 { // telemetry.Point.Busy, as converted
					cp.BusyGPUs++
				}
			}
		}
		for _, cp := range byT {
			out.Points = append(out.Points, *cp)
		}
		sort.Slice(out.Points, func(a, b int) bool { return out.Points[a].T < out.Points[b].T })
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
	r, err := rangeParam(c)
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
