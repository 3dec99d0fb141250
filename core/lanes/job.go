package lanes

import (
	"fmt"
	"math"

	"github.com/gpuportal/gpuportal/core/memest"
)

// Job is a job to admit to a GPU's lanes.
type Job struct {
	ID int64
	// Memory is the job's estimate before padding (see core/memest);
	// admission pads it with Config.Padding.
	Memory memest.Estimate
	// DurationS is the job's declared total GPU time in seconds, 0 when
	// unknown. srtf reads it: remaining = DurationS - GPU time so far.
	DurationS float64
	// Iterations is the job's declared number of iterations, 0 when
	// unknown. Without DurationS, srtf estimates the remaining time as
	// the iterations left times the mean iteration time measured so far.
	Iterations int64
}

// check refuses negative memory and times that are not finite.
func (j Job) check() error {
	if j.Memory.PersistentMiB < 0 || j.Memory.EphemeralMiB < 0 {
		return fmt.Errorf("job %d memory P %d E %d MiB: %w", j.ID, j.Memory.PersistentMiB, j.Memory.EphemeralMiB, ErrBadInput)
	}
	if j.DurationS < 0 || math.IsNaN(j.DurationS) || math.IsInf(j.DurationS, 0) || j.Iterations < 0 {
		return fmt.Errorf("job %d duration %v s, %d iterations: %w", j.ID, j.DurationS, j.Iterations, ErrBadInput)
	}
	return nil
}

// member is an admitted job on a GPU.
type member struct {
	job     Job
	seq     uint64 // admission order on this GPU's manager
	lane    *lane
	mem     memest.Estimate // padded P and E held now
	tracker *memest.Tracker

	admittedAt float64
	gpuTime    float64 // seconds of iterations run
	iterations int64   // iterations finished
	exceeded   bool    // outgrew its lane: no more iterations

	ready     bool
	running   bool
	startedAt float64
}

// remaining is the job's remaining time for srtf and whether it is known.
func (m *member) remaining() (float64, bool) {
	if m.job.DurationS > 0 {
		return max(0, m.job.DurationS-m.gpuTime), true
	}
	if m.job.Iterations > 0 && m.iterations > 0 {
		left := max(0, m.job.Iterations-m.iterations)
		return float64(left) * m.gpuTime / float64(m.iterations), true
	}
	return 0, false
}

// lane is a slice of ephemeral memory shared in time by its members.
type lane struct {
	id      int
	size    int64     // the largest E among members
	members []*member // in admission order
	running *member   // the member whose iteration runs, or nil
}

// resize sets the lane's size to the largest E among its members.
func (l *lane) resize() {
	l.size = 0
	for _, m := range l.members {
		l.size = max(l.size, m.mem.EphemeralMiB)
	}
}

// remove takes m out of the lane.
func (l *lane) remove(m *member) {
	for i, x := range l.members {
		if x == m {
			l.members = append(l.members[:i], l.members[i+1:]...)
			break
		}
	}
	if l.running == m {
		l.running = nil
	}
}

// add puts m in the lane, keeping admission order.
func (l *lane) add(m *member) {
	i := len(l.members)
	for i > 0 && l.members[i-1].seq > m.seq {
		i--
	}
	l.members = append(l.members, nil)
	copy(l.members[i+1:], l.members[i:])
	l.members[i] = m
	m.lane = l
	if m.running {
		l.running = m
	}
}
