package lanes

import (
	"slices"

	"github.com/gpuportal/gpuportal/core/memest"
)

// GPUView is a GPU's lane state, for pages, the API and tests.
type GPUView struct {
	Index       int
	CapacityMiB int64
	// UsedMiB is the left side of the safety condition.
	UsedMiB       int64
	PersistentMiB int64
	Lanes         []LaneView
	// Held is set for a Pool GPU held exclusively outside the lanes,
	// ReservedFor names the waiting job a Pool reserved it for, and
	// DrainingFor the waiting job its lanes drain for (0: none).
	Held        bool
	ReservedFor int64
	DrainingFor int64
}

// LaneView is one lane.
type LaneView struct {
	ID      int
	SizeMiB int64
	// Running is the job whose iteration runs now, 0 when none.
	Running int64
	// Draining is set while the lane gets no new iteration because a
	// Pool will merge it to admit a waiting job.
	Draining bool
	Jobs     []JobView // in admission order
}

// JobView is one admitted job.
type JobView struct {
	ID int64
	// Memory is the padded P and E the job holds; Source says where E
	// came from (Measured once peaks were observed).
	Memory memest.Estimate
	// Declared is the estimate the job was admitted with, unpadded.
	Declared memest.Estimate
	// MeasuredPeaks counts the peaks observed; MaxPeakMiB is the largest.
	MeasuredPeaks int64
	MaxPeakMiB    int64
	AdmittedAt    float64
	GPUTimeS      float64
	Iterations    int64
	Ready         bool
	Running       bool
	Exceeded      bool
	// RemainingS is srtf's estimate, -1 when unknown.
	RemainingS float64
}

// View returns the GPU's state, lanes in ID order.
func (g *GPU) View() GPUView {
	v := GPUView{Index: g.index, CapacityMiB: g.capacity, UsedMiB: g.UsedMiB(), PersistentMiB: g.persistent}
	for _, l := range g.lanes {
		lv := LaneView{ID: l.id, SizeMiB: l.size, Draining: slices.Contains(g.draining, l.id)}
		if l.running != nil {
			lv.Running = l.running.job.ID
		}
		for _, m := range l.members {
			lv.Jobs = append(lv.Jobs, m.view())
		}
		v.Lanes = append(v.Lanes, lv)
	}
	return v
}

func (m *member) view() JobView {
	r, ok := m.remaining()
	if !ok {
		r = -1
	}
	return JobView{
		ID: m.job.ID, Memory: m.mem, Declared: m.job.Memory,
		MeasuredPeaks: m.tracker.Samples(), MaxPeakMiB: m.tracker.MaxPeakMiB(),
		AdmittedAt: m.admittedAt, GPUTimeS: m.gpuTime, Iterations: m.iterations,
		Ready: m.ready, Running: m.running, Exceeded: m.exceeded, RemainingS: r,
	}
}
