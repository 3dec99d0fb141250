package lanes

import (
	"fmt"
	"slices"

	"github.com/gpuportal/gpuportal/core/memest"
)

// GPU is the lane state of one device: its jobs, their persistent memory,
// and the lanes that share its ephemeral memory.
type GPU struct {
	index      int
	capacity   int64
	cfg        Config
	lanes      []*lane // in lane ID order
	jobs       map[int64]*member
	persistent int64 // sum of P over jobs
	nextLane   int
	nextSeq    uint64
	draining   []int // lanes that get no new iteration until merged
}

// NewGPU returns an empty GPU with the given index (any number the
// caller uses to name it) and memory capacity in MiB.
func NewGPU(index int, capacityMiB int64, cfg Config) (*GPU, error) {
	if capacityMiB <= 0 {
		return nil, fmt.Errorf("GPU %d capacity %d MiB: %w", index, capacityMiB, ErrBadInput)
	}
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, fmt.Errorf("GPU %d: %w", index, err)
	}
	return &GPU{index: index, capacity: capacityMiB, cfg: cfg, jobs: make(map[int64]*member), nextLane: 1}, nil
}

// Index is the number the GPU was created with.
func (g *GPU) Index() int { return g.index }

// CapacityMiB is the GPU's memory.
func (g *GPU) CapacityMiB() int64 { return g.capacity }

// UsedMiB is the left side of the safety condition: the sum of P over
// the GPU's jobs plus the sum of its lanes' sizes.
func (g *GPU) UsedMiB() int64 {
	used := g.persistent
	for _, l := range g.lanes {
		used += l.size
	}
	return used
}

// FreeMiB is the capacity less UsedMiB.
func (g *GPU) FreeMiB() int64 { return g.capacity - g.UsedMiB() }

// Empty reports whether the GPU holds no job.
func (g *GPU) Empty() bool { return len(g.jobs) == 0 }

// Len is the number of jobs admitted.
func (g *GPU) Len() int { return len(g.jobs) }

// Has reports whether job id is admitted here.
func (g *GPU) Has(id int64) bool { _, ok := g.jobs[id]; return ok }

// JobIDs lists the admitted jobs in admission order.
func (g *GPU) JobIDs() []int64 {
	ms := g.membersBySeq()
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.job.ID
	}
	return out
}

// Held is the padded estimate job id holds now (P, and the E its lane
// is sized for), and whether the job is here.
func (g *GPU) Held(id int64) (memest.Estimate, bool) {
	m, ok := g.jobs[id]
	if !ok {
		return memest.Estimate{}, false
	}
	return m.mem, true
}

// membersBySeq returns every member in admission order.
func (g *GPU) membersBySeq() []*member {
	out := make([]*member, 0, len(g.jobs))
	for _, m := range g.jobs {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *member) int { return cmpU64(a.seq, b.seq) })
	return out
}

func (g *GPU) laneByID(id int) *lane {
	for _, l := range g.lanes {
		if l.id == id {
			return l
		}
	}
	return nil
}

// drain stops new iterations in the given lanes (nil: none).
func (g *GPU) drain(ids []int) { g.draining = slices.Clone(ids) }

// drained reports whether at most one of the draining lanes still runs
// an iteration, so that they may be merged.
func (g *GPU) drained() bool {
	running := 0
	for _, l := range g.lanes {
		if l.running != nil && slices.Contains(g.draining, l.id) {
			running++
		}
	}
	return running <= 1
}

// removeLane drops an empty lane.
func (g *GPU) removeLane(l *lane) {
	g.lanes = slices.DeleteFunc(g.lanes, func(x *lane) bool { return x == l })
}

// Check verifies the GPU's invariants: the safety condition, every lane
// non-empty and sized to its largest E, at most one running iteration
// per lane, and the bookkeeping consistent. It returns nil when all hold;
// tests call it after every step.
func (g *GPU) Check() error {
	var p int64
	seen := 0
	for i, l := range g.lanes {
		if i > 0 && g.lanes[i-1].id >= l.id {
			return fmt.Errorf("GPU %d: lanes out of order", g.index)
		}
		if len(l.members) == 0 {
			return fmt.Errorf("GPU %d lane %d: empty lane kept", g.index, l.id)
		}
		var size int64
		running := 0
		for k, m := range l.members {
			if g.jobs[m.job.ID] != m || m.lane != l {
				return fmt.Errorf("GPU %d lane %d: job %d misfiled", g.index, l.id, m.job.ID)
			}
			if k > 0 && l.members[k-1].seq >= m.seq {
				return fmt.Errorf("GPU %d lane %d: members out of admission order", g.index, l.id)
			}
			if m.mem.PersistentMiB < 0 || m.mem.EphemeralMiB < 0 {
				return fmt.Errorf("GPU %d job %d: negative memory", g.index, m.job.ID)
			}
			size = max(size, m.mem.EphemeralMiB)
			p += m.mem.PersistentMiB
			if m.running {
				running++
				if l.running != m {
					return fmt.Errorf("GPU %d lane %d: job %d runs but the lane does not know", g.index, l.id, m.job.ID)
				}
			}
			seen++
		}
		if running > 1 {
			return fmt.Errorf("GPU %d lane %d: %d iterations at once", g.index, l.id, running)
		}
		if l.running != nil && !l.running.running {
			return fmt.Errorf("GPU %d lane %d: stale running job", g.index, l.id)
		}
		if size != l.size {
			return fmt.Errorf("GPU %d lane %d: size %d, largest E %d", g.index, l.id, l.size, size)
		}
	}
	if seen != len(g.jobs) {
		return fmt.Errorf("GPU %d: %d jobs in lanes, %d known", g.index, seen, len(g.jobs))
	}
	if p != g.persistent {
		return fmt.Errorf("GPU %d: persistent sum %d, recorded %d", g.index, p, g.persistent)
	}
	if used := g.UsedMiB(); used > g.capacity {
		return fmt.Errorf("GPU %d: safety condition broken: %d MiB used of %d", g.index, used, g.capacity)
	}
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
