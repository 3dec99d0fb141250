package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/telemetry"
)

// historyWindow is how much GPU history a chart starts with.
const historyWindow = 10 * time.Minute

// gpuHistory returns the history of every GPU of the connected machines.
func (s *Server) gpuHistory(since int64) []api.GPUSeries {
	out := []api.GPUSeries{}
	gl := s.app.GPULanes()
	for _, g := range s.app.ConnectedGPUs() {
		gs := api.GPUSeries{UUID: g.Device.UUID, Node: g.Key.Node, Index: g.Key.Index, Model: g.Device.Model,
			Points: pointsOf(s.cfg.Telemetry.GPU(g.Key, since))}
		if l, ok := gl[g.Key]; ok {
			gs.Lanes = &l
		}
		out = append(out, gs)
	}
	return out
}

// frameSeries is frame f as the gpus topic's update sends it: each
// connected GPU with its reading of f, as the snapshot's series.
func (s *Server) frameSeries(f telemetry.Frame) []api.GPUSeries {
	byKey := make(map[gpu.Ref]telemetry.Point, len(f.GPUs))
	for _, g := range f.GPUs {
		byKey[g.Ref] = g.Point
	}
	out := []api.GPUSeries{}
	for _, g := range s.app.ConnectedGPUs() {
		if p, ok := byKey[g.Key]; ok {
			out = append(out, api.GPUSeries{UUID: g.Device.UUID, Node: g.Key.Node, Index: g.Key.Index, Model: g.Device.Model,
				Points: []api.Point{pointOf(p)}})
		}
	}
	return out
}

// sinceParam reads ?since= (Unix seconds); the default is the history window.
func (s *Server) sinceParam(c echo.Context) (int64, error) {
	v := c.QueryParam("since")
	if v == "" {
		return s.cfg.Now().Add(-historyWindow).Unix(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, echo.NewHTTPError(http.StatusBadRequest, "since: must be a Unix time in seconds")
	}
	return n, nil
}

// apiGPUs returns every GPU's history: memory used and total (MiB),
// utilization, and the memory of each job on it.
func (s *Server) apiGPUs(c echo.Context) error {
	since, err := s.sinceParam(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.gpuHistory(since))
}

// apiJobMemory returns a job's GPU memory over time, one point per GPU per
// second; with ?range= past 10m, the memory used on the GPUs it runs on
// (or last ran on), per step, while it ran (jobGPUHistory).
func (s *Server) apiJobMemory(c echo.Context) error {
	j, err := s.loadJob(c)
	if err != nil {
		return err
	}
	if c.QueryParam("range") != "" {
		r, err := rangeParam(c)
		if err != nil {
			return err
		}
		if r.Step > 1 {
			pts, err := s.jobGPUHistory(c.Request().Context(), j, r)
			if err != nil {
				return err
			}
			return c.JSON(http.StatusOK, pts)
		}
	}
	since, err := s.sinceParam(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, jobMemoryOf(s.cfg.Telemetry.Job(j.ID, since)))
}

var upgrader = websocket.Upgrader{
	ReadBufferSize: 1024, WriteBufferSize: 16 << 10,
	// The default origin check refuses pages of other sites, so another
	// site cannot open this socket with a visitor's cookies.
}
