package app

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/gpuhist"
	"github.com/gpuportal/gpuportal/core/telemetry"
)

// JobGPUHistory is the average memory used on the GPUs job j runs on (or
// last ran on) over the last span of its run, per step seconds, from the
// database's minute and hour rows: the database keeps GPUs, not jobs, so
// on a shared GPU this includes its neighbours. The caller has read j
// for an actor who may see it (App.Job).
func (s *App) JobGPUHistory(ctx context.Context, v *Job, span time.Duration, step int64) ([]api.JobMemory, error) {
	j := &v.row
	out := []api.JobMemory{}
	if j.StartedAt == nil {
		return out, nil
	}
	to := s.cfg.Now().Unix()
	if j.FinishedAt != nil {
		to = j.FinishedAt.Unix()
	}
	from := max(to-int64(span/time.Second), j.StartedAt.Unix())
	from -= from % 60
	on := make(map[gpu.Ref]bool)
	for _, p := range j.Placement {
		node, idx, ok := strings.Cut(p, ":")
		if n, err := strconv.Atoi(idx); ok && err == nil {
			on[gpu.Ref{Node: node, Index: n}] = true
		}
	}
	if len(on) == 0 {
		return out, nil
	}
	rows, err := s.cfg.Store.GPUHistoryRange(ctx, "", from, to+1)
	if err != nil {
		return nil, stored(err)
	}
	var as []telemetry.Aggregate
	for _, row := range rows {
		if a := row.Aggregate(); on[a.GPU] {
			as = append(as, a)
		}
	}
	rolled := gpuhist.Rollup(as, step)
	sort.SliceStable(rolled, func(a, b int) bool { return rolled[a].Start < rolled[b].Start })
	for _, a := range rolled {
		out = append(out, api.JobMemory{T: a.Start, Node: a.GPU.Node, GPU: a.GPU.Index, MemMiB: int64(a.MemUsedAvgMiB + 0.5)})
	}
	return out, nil
}
