package lanes

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpuportal/gpuportal/core/memest"
)

// Placement says how a job enters, or would enter, a GPU.
type Placement struct {
	Job int64
	GPU int
	// Lane is the lane the job joins, or the ID its new lane gets.
	Lane int
	// NewLane is true when the job opens a lane of its own.
	NewLane bool
	// Merged lists the lanes merged to make room, empty when none: before
	// the job enters, every lane in Merged[1:] is merged into Merged[0].
	Merged []int
	// Memory is the job's padded estimate: the P and E it holds.
	Memory memest.Estimate
	// GrowthMiB is how much the lane grows: E for a new lane, E less the
	// lane's size (at least 0) for a joined one.
	GrowthMiB int64
	// LaneSizeMiB is the joined lane's size before the job (0 for a new
	// lane), and Sharers the jobs already in it.
	LaneSizeMiB int64
	Sharers     int
	// FreeAfterMiB is the GPU's free memory once the job is in.
	FreeAfterMiB int64
}

// laneInfo is what planning needs of a lane.
type laneInfo struct {
	id      int
	size    int64
	sharers int
	running bool
}

// Plan returns how Admit would admit j now, changing nothing. It fails
// with ErrTooLarge when j's padded P + E exceeds the capacity, with
// ErrNoRoom when j does not fit now, and with ErrDuplicate when j is
// already here.
func (g *GPU) Plan(j Job) (Placement, error) {
	if err := j.check(); err != nil {
		return Placement{}, err
	}
	if g.Has(j.ID) {
		return Placement{}, fmt.Errorf("GPU %d job %d: %w", g.index, j.ID, ErrDuplicate)
	}
	mem := g.cfg.Padding.Apply(j.Memory)
	p, ok := g.plan(mem)
	if ok {
		p.Job = j.ID
		return p, nil
	}
	if mem.TotalMiB() > g.capacity {
		return Placement{}, fmt.Errorf("GPU %d: P %d + E %d MiB > capacity %d: %w",
			g.index, mem.PersistentMiB, mem.EphemeralMiB, g.capacity, ErrTooLarge)
	}
	return Placement{}, fmt.Errorf("GPU %d: P %d + E %d MiB with %d MiB free in %d lanes: %w",
		g.index, mem.PersistentMiB, mem.EphemeralMiB, g.FreeMiB(), len(g.lanes), ErrNoRoom)
}

// plan finds the placement for a padded estimate: a new lane when P + E
// is free; else the best-fitting existing lane; else the fewest lane
// merges after which one of those fits. It reports false when none fits
// (or the job is larger than the GPU).
func (g *GPU) plan(mem memest.Estimate) (Placement, bool) {
	if mem.TotalMiB() > g.capacity {
		return Placement{}, false
	}
	free, infos := g.FreeMiB(), g.laneInfos()
	if p, ok := g.bestFit(mem, free, infos); ok {
		return p, true
	}
	return g.planMerge(mem, free, infos, false)
}

// planDrained is the merge plan that would fit mem if the GPU's running
// iterations had ended: it ignores which lanes run. Pool uses it to
// drain lanes for a waiting job (see Pool.Admit).
func (g *GPU) planDrained(mem memest.Estimate) (Placement, bool) {
	if mem.TotalMiB() > g.capacity {
		return Placement{}, false
	}
	return g.planMerge(mem, g.FreeMiB(), g.laneInfos(), true)
}

func (g *GPU) laneInfos() []laneInfo {
	infos := make([]laneInfo, len(g.lanes))
	for i, l := range g.lanes {
		infos[i] = laneInfo{id: l.id, size: l.size, sharers: len(l.members), running: l.running != nil}
	}
	return infos
}

// bestFit places mem given free memory and lanes, without merging: a
// new lane if P + E fits, else the lane that grows least, then the
// smallest, then the one with fewest sharers, then the lowest ID.
func (g *GPU) bestFit(mem memest.Estimate, free int64, infos []laneInfo) (Placement, bool) {
	if mem.TotalMiB() <= free {
		return Placement{
			GPU: g.index, Lane: g.nextLane, NewLane: true, Memory: mem,
			GrowthMiB: mem.EphemeralMiB, FreeAfterMiB: free - mem.TotalMiB(),
		}, true
	}
	best, found := laneInfo{}, false
	var bestGrowth int64
	for _, l := range infos {
		growth := max(0, mem.EphemeralMiB-l.size)
		if mem.PersistentMiB+growth > free {
			continue
		}
		if !found || joinLess(growth, l, bestGrowth, best) {
			best, bestGrowth, found = l, growth, true
		}
	}
	if !found {
		return Placement{}, false
	}
	return Placement{
		GPU: g.index, Lane: best.id, Memory: mem, GrowthMiB: bestGrowth,
		LaneSizeMiB: best.size, Sharers: best.sharers,
		FreeAfterMiB: free - mem.PersistentMiB - bestGrowth,
	}, true
}

// joinLess orders candidate lanes for best fit.
func joinLess(ga int64, a laneInfo, gb int64, b laneInfo) bool {
	if c := cmp.Compare(ga, gb); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.size, b.size); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.sharers, b.sharers); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

// planMerge finds the fewest merges that make room: the largest lane is
// the target (so merging another lane into it frees that lane's whole
// size), and the others join it largest first. Two running iterations
// must never share a lane, so a lane whose iteration runs is skipped
// when the group already has one, unless ignoreRunning. After each
// merge, the job is placed as bestFit would.
func (g *GPU) planMerge(mem memest.Estimate, free int64, infos []laneInfo, ignoreRunning bool) (Placement, bool) {
	if len(infos) < 2 {
		return Placement{}, false
	}
	order := slices.Clone(infos)
	slices.SortFunc(order, func(a, b laneInfo) int {
		if c := cmp.Compare(b.size, a.size); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	target := order[0]
	running := target.running
	merged := []int{target.id}
	rest := make([]laneInfo, 0, len(infos))
	for _, l := range order[1:] {
		if l.running && running && !ignoreRunning {
			continue
		}
		running = running || l.running
		merged = append(merged, l.id)
		free += l.size
		target.sharers += l.sharers
		target.running = running
		rest = rest[:0]
		for _, x := range infos {
			if !slices.Contains(merged, x.id) {
				rest = append(rest, x)
			}
		}
		rest = append(rest, target)
		if p, ok := g.bestFit(mem, free, rest); ok {
			p.Merged = slices.Clone(merged)
			return p, true
		}
	}
	return Placement{}, false
}
