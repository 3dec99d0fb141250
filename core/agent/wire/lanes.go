package wire

import (
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

// GPULanes is the Salus lane state of one GPU (lanes.GPUView): the jobs
// that share it, their memory, and who runs an iteration now.
type GPULanes struct {
	Index         int    `json:"index"`
	CapacityMiB   int64  `json:"capacity_mib"`
	UsedMiB       int64  `json:"used_mib"` // the left side of the safety condition
	PersistentMiB int64  `json:"persistent_mib"`
	Lanes         []Lane `json:"lanes"`
}

// Lane is one lane of a GPU.
type Lane struct {
	ID       int       `json:"id"`
	SizeMiB  int64     `json:"size_mib"`
	Running  int64     `json:"running,omitempty"` // the job whose iteration runs now
	Draining bool      `json:"draining,omitempty"`
	Jobs     []LaneJob `json:"jobs"`
}

// LaneJob is one job of a lane: the padded memory it holds.
type LaneJob struct {
	JobID      int64    `json:"job_id"`
	Memory     Estimate `json:"memory"`
	MaxPeakMiB int64    `json:"max_peak_mib,omitempty"`
	Iterations int64    `json:"iterations,omitempty"`
}

// FromLanes encodes the lanes of a machine's GPUs.
func FromLanes(gs []lanes.GPUView) []GPULanes {
	if len(gs) == 0 {
		return nil
	}
	out := make([]GPULanes, len(gs))
	for i, g := range gs {
		w := GPULanes{Index: g.Index, CapacityMiB: g.CapacityMiB, UsedMiB: g.UsedMiB,
			PersistentMiB: g.PersistentMiB, Lanes: make([]Lane, len(g.Lanes))}
		for k, l := range g.Lanes {
			wl := Lane{ID: l.ID, SizeMiB: l.SizeMiB, Running: l.Running, Draining: l.Draining, Jobs: make([]LaneJob, len(l.Jobs))}
			for n, j := range l.Jobs {
				wl.Jobs[n] = LaneJob{JobID: j.ID, Memory: FromEstimate(j.Memory), MaxPeakMiB: j.MaxPeakMiB, Iterations: j.Iterations}
			}
			w.Lanes[k] = wl
		}
		out[i] = w
	}
	return out
}

// Lanes decodes the lanes of a machine's GPUs.
func Lanes(ws []GPULanes) []lanes.GPUView {
	if len(ws) == 0 {
		return nil
	}
	out := make([]lanes.GPUView, len(ws))
	for i, w := range ws {
		g := lanes.GPUView{Index: w.Index, CapacityMiB: w.CapacityMiB, UsedMiB: w.UsedMiB, PersistentMiB: w.PersistentMiB}
		for _, wl := range w.Lanes {
			l := lanes.LaneView{ID: wl.ID, SizeMiB: wl.SizeMiB, Running: wl.Running, Draining: wl.Draining}
			for _, j := range wl.Jobs {
				l.Jobs = append(l.Jobs, lanes.JobView{ID: j.JobID, Memory: j.Memory.Estimate(), MaxPeakMiB: j.MaxPeakMiB,
					Iterations: j.Iterations, Running: wl.Running == j.JobID})
			}
			g.Lanes = append(g.Lanes, l)
		}
		out[i] = g
	}
	return out
}

// FromEstimate encodes a memory estimate.
func FromEstimate(e memest.Estimate) Estimate {
	return Estimate{PersistentMiB: e.PersistentMiB, EphemeralMiB: e.EphemeralMiB, Source: string(e.Source)}
}

// Estimate decodes a memory estimate.
func (e Estimate) Estimate() memest.Estimate {
	return memest.Estimate{PersistentMiB: e.PersistentMiB, EphemeralMiB: e.EphemeralMiB, Source: memest.Source(e.Source)}
}
