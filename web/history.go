package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/gpuhist"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
)

// GPU history over longer ranges than the live window: the charts offer
// 10 minutes (per second, from memory) and 1 hour, 24 hours and 7 days
// (from the minute and hour rows of the database; see models/history.go).

// historyRange is one range a chart offers and the step it is drawn at.
type historyRange struct {
	Name string
	Span time.Duration
	Step int64 // seconds per point; 1 is the live, per-second window
}

var historyRanges = []historyRange{
	{"10m", historyWindow, 1},
	{"1h", time.Hour, 60},
	{"24h", 24 * time.Hour, 300},
	{"7d", 7 * 24 * time.Hour, 3600},
}

// rangeParam reads ?range=; the default is the live 10 minutes.
func rangeParam(c echo.Context) (historyRange, error) {
	v := c.QueryParam("range")
	if v == "" {
		return historyRanges[0], nil
	}
	for _, r := range historyRanges {
		if r.Name == v {
			return r, nil
		}
	}
	return historyRange{}, badRequest("range: want 10m, 1h, 24h or 7d, got %q", v)
}

func pointFromAggregate(a telemetry.Aggregate) api.HistoryPoint {
	p := api.HistoryPoint{T: a.Start, Step: a.Step, Samples: a.Samples, MemMiB: a.MemMiB, MemUsedAvgMiB: a.MemUsedAvgMiB,
		MemUsedMaxMiB: a.MemUsedMaxMiB, UtilAvgPct: a.UtilAvgPct}
	if a.Samples > 0 {
		p.BusyPct = 100 * float64(a.BusySamples) / float64(a.Samples)
	}
	if a.PowerSamples > 0 {
		w := a.PowerAvgW
		p.PowerAvgW = &w
	}
	if a.TempSamples > 0 {
		c := a.TempAvgC
		p.TempAvgC = &c
	}
	return p
}

func pointFromLive(p telemetry.Point) api.HistoryPoint {
	busy := 0.0
	if p.Busy() {
		busy = 100
	}
	out := api.HistoryPoint{T: p.T, Step: 1, Samples: 1, MemMiB: p.MemMiB, MemUsedAvgMiB: float64(p.MemUsedMiB),
		MemUsedMaxMiB: p.MemUsedMiB, UtilAvgPct: p.UtilPct, BusyPct: busy}
	if p.PowerW > 0 {
		w := p.PowerW
		out.PowerAvgW = &w
	}
	if p.TempC > 0 {
		c := float64(p.TempC)
		out.TempAvgC = &c
	}
	return out
}

// connectedGPU is a GPU of a connected machine.
type connectedGPU struct {
	Key    telemetry.GPUKey
	Device gpu.Device
}

// connectedGPUs lists the GPUs of the connected machines, by node and index.
func (s *Server) connectedGPUs() []connectedGPU {
	var out []connectedGPU
	for _, n := range s.cfg.Engine.Nodes() {
		for _, d := range n.Devices() {
			out = append(out, connectedGPU{Key: telemetry.GPUKey{Node: n.Name(), Index: d.Index}, Device: d})
		}
	}
	return out
}

// gpuByUUID finds a connected GPU.
func (s *Server) gpuByUUID(uuid string) (connectedGPU, bool) {
	for _, g := range s.connectedGPUs() {
		if g.Device.UUID == uuid {
			return g, true
		}
	}
	return connectedGPU{}, false
}

// historyOf returns the history of GPUs over r, one series per GPU
// (uuid; all GPUs when empty), live GPUs first in node order, then GPUs
// that are gone but left history.
func (s *Server) historyOf(ctx context.Context, uuid string, r historyRange) ([]api.GPUHistory, error) {
	now := s.cfg.Now()
	var out []api.GPUHistory
	byUUID := make(map[string]int)
	series := func(id, node string, index int) *api.GPUHistory {
		i, ok := byUUID[id]
		if !ok {
			i = len(out)
			byUUID[id] = i
			out = append(out, api.GPUHistory{UUID: id, Node: node, Index: index, Range: r.Name, Step: r.Step, Points: []api.HistoryPoint{}})
		}
		return &out[i]
	}
	for _, g := range s.connectedGPUs() {
		if uuid == "" || g.Device.UUID == uuid {
			series(g.Device.UUID, g.Key.Node, g.Key.Index)
		}
	}
	if r.Step == 1 {
		since := now.Add(-r.Span).Unix()
		for i := range out {
			for _, p := range s.cfg.Telemetry.GPU(telemetry.GPUKey{Node: out[i].Node, Index: out[i].Index}, since) {
				out[i].Points = append(out[i].Points, pointFromLive(p))
			}
		}
		return out, nil
	}
	to := now.Unix()
	from := to - int64(r.Span/time.Second)
	from -= from % r.Step
	rows, err := s.cfg.Store.GPUHistoryRange(ctx, uuid, from, to+1)
	if err != nil {
		return nil, err
	}
	perGPU := make(map[string][]telemetry.Aggregate)
	var order []string
	for _, row := range rows {
		if _, ok := perGPU[row.GPU]; !ok {
			order = append(order, row.GPU)
			series(row.GPU, row.Node, row.GPUIndex)
		}
		a := row.Aggregate()
		a.GPU = telemetry.GPUKey{} // one series per UUID, wherever it sat
		perGPU[row.GPU] = append(perGPU[row.GPU], a)
	}
	for _, id := range order {
		sr := series(id, "", 0)
		for _, a := range gpuhist.Rollup(perGPU[id], r.Step) {
			sr.Points = append(sr.Points, pointFromAggregate(a))
		}
	}
	return out, nil
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
	hs, err := s.historyOf(c.Request().Context(), uuid, r)
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
	hs, err := s.historyOf(c.Request().Context(), "", r)
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
func (s *Server) clusterHistory(ctx context.Context, r historyRange) (api.ClusterHistory, error) {
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
		pts, err := s.cfg.Store.ClusterGPUHistory(ctx, from, now+1)
		if err != nil {
			return out, err
		}
		out.Points = clusterSteps(pts, r.Step)
	}
	jobs, err := s.cfg.Store.ClusterHistoryRange(ctx, from-from%60, now+1)
	if err != nil {
		return out, err
	}
	out.Jobs = jobSteps(jobs, max(r.Step, 60))
	return out, nil
}

// clusterSteps averages stored cluster buckets (minutes, hours) into steps.
func clusterSteps(pts []models.ClusterGPUPoint, step int64) []api.ClusterPoint {
	type acc struct {
		p api.ClusterPoint
		w float64 // seconds covered
	}
	var order []int64
	accs := make(map[int64]*acc)
	for _, p := range pts {
		t := p.Start
		if int64(p.Step) < step {
			t -= t % step
		}
		a := accs[t]
		if a == nil {
			a = &acc{p: api.ClusterPoint{T: t}}
			accs[t] = a
			order = append(order, t)
		}
		w := float64(p.Step)
		a.p.GPUs = max(a.p.GPUs, p.GPUs)
		a.p.BusyGPUs += p.BusyGPUs * w
		a.p.MemUsedMiB += p.MemUsedAvgMiB * w
		a.p.MemMiB = max(a.p.MemMiB, p.MemMiB)
		a.w += w
	}
	out := make([]api.ClusterPoint, 0, len(order))
	for _, t := range order {
		a := accs[t]
		a.p.BusyGPUs /= a.w
		a.p.MemUsedMiB /= a.w
		out = append(out, a.p)
	}
	return out
}

// jobSteps averages the per-minute job counts into steps.
func jobSteps(rows []models.ClusterHistory, step int64) []api.ClusterJobsPoint {
	out := []api.ClusterJobsPoint{}
	n := 0
	for _, r := range rows {
		t := r.Start - r.Start%step
		if len(out) == 0 || out[len(out)-1].T != t {
			if n > 0 {
				last := &out[len(out)-1]
				last.Queued, last.Running, last.Preempted = last.Queued/float64(n), last.Running/float64(n), last.Preempted/float64(n)
			}
			out = append(out, api.ClusterJobsPoint{T: t})
			n = 0
		}
		last := &out[len(out)-1]
		last.Queued += float64(r.Queued)
		last.Running += float64(r.Running)
		last.Preempted += float64(r.Preempted)
		n++
	}
	if n > 0 {
		last := &out[len(out)-1]
		last.Queued, last.Running, last.Preempted = last.Queued/float64(n), last.Running/float64(n), last.Preempted/float64(n)
	}
	return out
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
func (s *Server) jobGPUHistory(ctx context.Context, j *models.Job, r historyRange) ([]api.JobMemory, error) {
	return s.app.JobGPUHistory(ctx, j, r.Span, r.Step)
}
