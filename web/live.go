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

// frameUpdate is frame f as the gpus topic's update sends it: each
// connected GPU's reading of f in a few numbers, grouped by machine and
// time (api.GPUsUpdate), in the order of ConnectedGPUs.
func (s *Server) frameUpdate(f telemetry.Frame) api.GPUsUpdate {
	byKey := make(map[gpu.Ref]telemetry.Point, len(f.GPUs))
	for _, g := range f.GPUs {
		byKey[g.Ref] = g.Point
	}
	out := api.GPUsUpdate{T: f.T, Nodes: []api.NodeReadings{}}
	for _, g := range s.app.ConnectedGPUs() {
		p, ok := byKey[g.Key]
		if !ok {
			continue
		}
		if n := len(out.Nodes); n == 0 || out.Nodes[n-1].Node != g.Key.Node || out.Nodes[n-1].T != p.T {
			out.Nodes = append(out.Nodes, api.NodeReadings{Node: g.Key.Node, T: p.T})
		}
		r := make([]int64, 3, 3+len(p.Held))
		r[0], r[1], r[2] = int64(g.Key.Index), p.MemUsedMiB, p.MemMiB
		nr := &out.Nodes[len(out.Nodes)-1]
		nr.GPUs = append(nr.GPUs, append(r, p.Held...))
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
		r, err := s.rangeParam(c)
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
