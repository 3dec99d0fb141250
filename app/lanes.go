package app

import (
	"slices"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/lanes"
)

// Salus lanes as the API and the pages show them (docs/salus.md): per
// GPU, the lanes its agent's gate holds, each lane's jobs with the
// persistent (P) and ephemeral (E) memory they hold, and who runs an
// iteration now.

// laneNode is a machine whose agent serves a gate and reports its lanes.
type laneNode interface {
	Lanes() []lanes.GPUView
}

// GPULanes returns the lanes of every GPU whose agent reports them.
func (s *App) GPULanes() map[gpu.Ref]api.GPULanes {
	out := make(map[gpu.Ref]api.GPULanes)
	for _, n := range s.cfg.Engine.Nodes() {
		ln, ok := n.(laneNode)
		if !ok {
			continue
		}
		for _, g := range ln.Lanes() {
			out[gpu.Ref{Node: n.Name(), Index: g.Index}] = lanesJSON(g)
		}
	}
	return out
}

func lanesJSON(g lanes.GPUView) api.GPULanes {
	out := api.GPULanes{CapacityMiB: g.CapacityMiB, UsedMiB: g.UsedMiB, PersistentMiB: g.PersistentMiB, Lanes: []api.Lane{}}
	for _, l := range g.Lanes {
		lj := api.Lane{ID: l.ID, SizeMiB: l.SizeMiB, Running: l.Running, Draining: l.Draining, Jobs: []api.LaneJob{}}
		for _, j := range l.Jobs {
			lj.Jobs = append(lj.Jobs, api.LaneJob{JobID: j.ID, PersistentMiB: j.Memory.PersistentMiB,
				EphemeralMiB: j.Memory.EphemeralMiB, Source: string(j.Memory.Source),
				MaxPeakMiB: j.MaxPeakMiB, Iterations: j.Iterations})
		}
		out.Lanes = append(out.Lanes, lj)
	}
	return out
}

// jobLane finds the lane of a sharing job; nil when it holds none.
func (s *App) jobLane(id int64) *api.JobLane {
	for k, g := range s.GPULanes() {
		for _, l := range g.Lanes {
			i := slices.IndexFunc(l.Jobs, func(j api.LaneJob) bool { return j.JobID == id })
			if i < 0 {
				continue
			}
			me := l.Jobs[i]
			out := &api.JobLane{Node: k.Node, GPU: k.Index, Lane: l.ID, SizeMiB: l.SizeMiB,
				Running: l.Running, LaneJobs: []int64{}, GPUJobs: []int64{},
				Held:       api.MemoryEstimate{PersistentMiB: me.PersistentMiB, EphemeralMiB: me.EphemeralMiB, Source: me.Source},
				MaxPeakMiB: me.MaxPeakMiB, Iterations: me.Iterations}
			for _, o := range g.Lanes {
				for _, j := range o.Jobs {
					switch {
					case j.JobID == id:
					case o.ID == l.ID:
						out.LaneJobs = append(out.LaneJobs, j.JobID)
					default:
						out.GPUJobs = append(out.GPUJobs, j.JobID)
					}
				}
			}
			return out
		}
	}
	return nil
}
