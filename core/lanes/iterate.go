package lanes

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpuportal/gpuportal/core/memest"
)

// Grant lets one job run one iteration on its lane.
type Grant struct {
	GPU   int
	Lane  int
	Job   int64
	Start float64
	// LaneJobs is how many jobs share the lane: 1 when the job has it to
	// itself, so a caller may let it run many iterations in one grant.
	LaneJobs int
}

// Finished reports an iteration that ended.
type Finished struct {
	GPU  int
	Lane int
	Job  int64
	// IterationS is the iteration's length; GPUTimeS the job's total.
	IterationS float64
	GPUTimeS   float64
	// EphemeralMiB is the E the job holds after the correction from the
	// measured peak.
	EphemeralMiB int64
	// Tight is set when the corrected E would need a larger lane than
	// the safety condition allows; the job keeps the lane's size.
	Tight bool
	// Exceeded is set when the measured peak was larger than the lane:
	// the job must be stopped (it runs no more iterations here) and
	// submitted again with the estimate in Requeue.
	Exceeded bool
	Requeue  memest.Estimate
	// Retry is set by Pool.Finish when lanes drained for a waiting job
	// may now be merged: call Pool.Admit or Pool.Schedule again.
	Retry bool
}

// Request records that job id is ready for its next iteration.
// expectedMiB is the ephemeral memory the job says the iteration needs,
// 0 when it does not say. The job's E is raised to it, its lane growing
// when the safety condition allows, and a correction from measured peaks
// never takes E below it again (memest.Tracker.Expect). When the lane
// cannot grow that far, Request fails with ErrExceedsLane, and the job
// should be stopped and submitted again. Asking twice is harmless;
// asking while running is ErrRunning.
func (g *GPU) Request(id int64, expectedMiB int64) error {
	m, ok := g.jobs[id]
	switch {
	case !ok:
		return fmt.Errorf("GPU %d job %d: %w", g.index, id, ErrUnknownJob)
	case m.running:
		return fmt.Errorf("GPU %d job %d: %w", g.index, id, ErrRunning)
	case m.exceeded:
		return fmt.Errorf("GPU %d job %d outgrew lane %d: %w", g.index, id, m.lane.id, ErrExceedsLane)
	}
	m.tracker.Expect(expectedMiB)
	if expectedMiB > m.mem.EphemeralMiB {
		if expectedMiB > m.lane.size+g.FreeMiB() {
			m.exceeded = true
			return fmt.Errorf("GPU %d job %d expects %d MiB, lane %d holds %d and cannot grow: %w",
				g.index, id, expectedMiB, m.lane.id, m.lane.size, ErrExceedsLane)
		}
		g.setEphemeral(m, expectedMiB)
	}
	m.ready = true
	return nil
}

// Grant starts an iteration on every lane that runs none and has a
// ready job, chosen by the policy, and returns the grants in lane order.
// Lanes a Pool drains for a merge get none.
func (g *GPU) Grant(now float64) []Grant {
	var out []Grant
	for _, l := range g.lanes {
		if l.running != nil || slices.Contains(g.draining, l.id) {
			continue
		}
		var pick *member
		for _, m := range l.members {
			if m.ready && (pick == nil || g.cfg.Policy.before(m, pick)) {
				pick = m
			}
		}
		if pick == nil {
			continue
		}
		pick.ready, pick.running, pick.startedAt = false, true, now
		l.running = pick
		out = append(out, Grant{GPU: g.index, Lane: l.id, Job: pick.job.ID, Start: now, LaneJobs: len(l.members)})
	}
	return out
}

// Finish ends job id's running iteration at now. peakMiB is the
// iteration's measured ephemeral peak, 0 when not measured. The job's E
// is corrected as memest.Tracker says (from MinSamples peaks on: the
// padded running average, at least the largest peak), and its lane
// resized: grown when the safety condition allows, else the job is
// marked Tight and keeps the lane's size. A peak larger than the lane is
// reported as Exceeded.
func (g *GPU) Finish(id int64, now float64, peakMiB int64) (Finished, error) {
	m, ok := g.jobs[id]
	if !ok {
		return Finished{}, fmt.Errorf("GPU %d job %d: %w", g.index, id, ErrUnknownJob)
	}
	if !m.running {
		return Finished{}, fmt.Errorf("GPU %d job %d: %w", g.index, id, ErrNotRunning)
	}
	if math.IsNaN(now) || now < m.startedAt {
		return Finished{}, fmt.Errorf("GPU %d job %d finishes at %v, started at %v: %w", g.index, id, now, m.startedAt, ErrBadInput)
	}
	l := m.lane
	d := now - m.startedAt
	m.running = false
	l.running = nil
	m.gpuTime += d
	m.iterations++
	f := Finished{GPU: g.index, Lane: l.id, Job: id, IterationS: d, GPUTimeS: m.gpuTime}
	if peakMiB > l.size {
		m.tracker.Observe(peakMiB)
		m.exceeded, m.ready = true, false
		f.Exceeded, f.Requeue, f.EphemeralMiB = true, m.tracker.Requeue(), m.mem.EphemeralMiB
		return f, nil
	}
	if peakMiB > 0 {
		m.tracker.Observe(peakMiB)
		est := m.tracker.Padded()
		f.Tight = g.setEphemeral(m, est.EphemeralMiB)
		m.mem.Source = est.Source
	}
	f.EphemeralMiB = m.mem.EphemeralMiB
	return f, nil
}

// setEphemeral sets m's E, resizing its lane; when the lane cannot grow
// that far safely, m's E becomes the lane's size (which held the peak)
// and setEphemeral reports true.
func (g *GPU) setEphemeral(m *member, e int64) (tight bool) {
	l := m.lane
	if e > l.size+g.FreeMiB() {
		e, tight = l.size, true
	}
	m.mem.EphemeralMiB = e
	l.resize()
	return tight
}
