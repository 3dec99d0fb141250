package lanes

import (
	"fmt"
	"math"

	"github.com/gpuportal/gpuportal/core/memest"
)

// Admit places job j on the GPU at time now as Plan describes: merging
// lanes first if the plan says so, then opening a new lane or joining
// one. Nothing changes when it fails.
func (g *GPU) Admit(j Job, now float64) (Placement, error) {
	if math.IsNaN(now) {
		return Placement{}, fmt.Errorf("GPU %d admit job %d at %v: %w", g.index, j.ID, now, ErrBadInput)
	}
	p, err := g.Plan(j)
	if err != nil {
		return Placement{}, err
	}
	g.apply(j, p, now)
	return p, nil
}

// apply carries out a placement that plan just computed.
func (g *GPU) apply(j Job, p Placement, now float64) {
	if len(p.Merged) > 0 {
		g.merge(p.Merged)
	}
	m := &member{
		job: j, seq: g.nextSeq, mem: p.Memory, admittedAt: now,
		tracker: memest.NewTracker(j.Memory, g.cfg.Padding),
	}
	g.nextSeq++
	var l *lane
	if p.NewLane {
		l = &lane{id: g.nextLane}
		g.nextLane++
		g.lanes = append(g.lanes, l)
	} else {
		l = g.laneByID(p.Lane)
	}
	l.add(m)
	l.resize()
	g.jobs[j.ID] = m
	g.persistent += m.mem.PersistentMiB
}

// merge moves every member of the lanes ids[1:] into lane ids[0] and
// drops the emptied lanes. The plan never merges two running lanes.
func (g *GPU) merge(ids []int) {
	target := g.laneByID(ids[0])
	for _, id := range ids[1:] {
		l := g.laneByID(id)
		for _, m := range l.members {
			target.add(m)
		}
		l.members = nil
		g.removeLane(l)
	}
	target.resize()
}

// Release removes job id from the GPU: its persistent memory is freed,
// its lane shrinks to the largest E left in it, or closes when empty. A
// running iteration of the job is abandoned.
func (g *GPU) Release(id int64) error {
	m, ok := g.jobs[id]
	if !ok {
		return fmt.Errorf("GPU %d release job %d: %w", g.index, id, ErrUnknownJob)
	}
	l := m.lane
	l.remove(m)
	m.running = false
	delete(g.jobs, id)
	g.persistent -= m.mem.PersistentMiB
	if len(l.members) == 0 {
		g.removeLane(l)
	} else {
		l.resize()
	}
	return nil
}
