package app

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/gpuhist"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
)

// GPU history over longer ranges than the live window, from the minute
// and hour rows of the database (models/history.go), and the live
// window's from the telemetry.

// GPUHistoryStore is what the reads of the GPU history read of the
// store; *models.Store is one.
type GPUHistoryStore interface {
	GPUHistoryRange(ctx context.Context, uuid string, from, to int64) ([]models.GPUHistory, error)
	ClusterGPUHistory(ctx context.Context, from, to int64) ([]models.ClusterGPUPoint, error)
	ClusterHistoryRange(ctx context.Context, from, to int64) ([]models.ClusterHistory, error)
}

// HistoryRange is one range a chart offers and the step it is drawn at.
type HistoryRange struct {
	Name string
	Span time.Duration
	Step int64 // seconds per point; 1 is the live, per-second window
}

// GPUHistories returns the history of GPUs over r, one series per GPU
// (uuid; all GPUs when empty), live GPUs first in node order, then GPUs
// that are gone but left history.
func (s *App) GPUHistories(ctx context.Context, uuid string, r HistoryRange) ([]api.GPUHistory, error) {
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
	for _, g := range s.ConnectedGPUs() {
		if uuid == "" || g.Device.UUID == uuid {
			series(g.Device.UUID, g.Key.Node, g.Key.Index)
		}
	}
	if r.Step == 1 {
		since := now.Add(-r.Span).Unix()
		for i := range out {
			for _, p := range s.cfg.Telemetry.GPU(gpu.Ref{Node: out[i].Node, Index: out[i].Index}, since) {
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
		return nil, stored(err)
	}
	perGPU := make(map[string][]telemetry.Aggregate)
	var order []string
	for _, row := range rows {
		if _, ok := perGPU[row.GPU]; !ok {
			order = append(order, row.GPU)
			series(row.GPU, row.Node, row.GPUIndex)
		}
		a := row.Aggregate()
		a.GPU = gpu.Ref{} // one series per UUID, wherever it sat
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

// ClusterGPUPoints sums the stored GPU history of the cluster over
// [from, to) into points of step seconds (minute and hour buckets
// averaged).
func (s *App) ClusterGPUPoints(ctx context.Context, from, to, step int64) ([]api.ClusterPoint, error) {
	pts, err := s.cfg.Store.ClusterGPUHistory(ctx, from, to)
	if err != nil {
		return nil, stored(err)
	}
	return clusterSteps(pts, step), nil
}

// ClusterJobPoints are the cluster's jobs by state over [from, to), the
// minutes' counts averaged into steps of step seconds.
func (s *App) ClusterJobPoints(ctx context.Context, from, to, step int64) ([]api.ClusterJobsPoint, error) {
	rows, err := s.cfg.Store.ClusterHistoryRange(ctx, from, to)
	if err != nil {
		return nil, stored(err)
	}
	return jobSteps(rows, step), nil
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
