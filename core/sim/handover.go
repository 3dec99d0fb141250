package sim

import (
	"math"

	"github.com/gpuportal/gpuportal/core/sched"
)

// The handover (Config.HandoverS), as the live engine applies it
// (core/engine/runs.go): a preempted job holds its GPUs for HandoverS
// seconds after the preemption (its checkpoint and exit), and a job the
// scheduler places on them meanwhile starts in a later pass, through the
// same sched.HandOver. In count mode (the scheduler names no GPUs) a
// start waits while fewer GPUs are free than it needs.

// release is a preempted job's hold on its GPUs.
type release struct {
	gpus  []sched.GPURef // nil in count mode
	n     int
	job   int64
	at    float64 // when the GPUs are free again
	since float64 // when the job was preempted
}

// holdAfterPreempt keeps the GPUs of a job just preempted (its run closed
// and its GPUs released by stopRun) until now + HandoverS.
func (s *simulator) holdAfterPreempt(j *job, gpus []sched.GPURef) {
	if s.cfg.HandoverS <= 0 {
		return
	}
	// Taken again as they were: a shared GPU stays shared.
	if err := s.gpus.take(j.tj.GPUs, gpus, false); err != nil {
		return // a shared GPU others still hold: nothing to hand over
	}
	s.releases = append(s.releases, release{gpus: gpus, n: j.tj.GPUs, job: j.tj.ID, at: s.now + s.cfg.HandoverS, since: s.now})
}

// releaseDue frees the GPUs whose hold has ended by s.now and reports
// whether any was freed.
func (s *simulator) releaseDue() bool {
	kept, freed := s.releases[:0], false
	for _, r := range s.releases {
		if r.at <= s.now {
			s.gpus.release(r.n, r.gpus)
			freed = true
			continue
		}
		kept = append(kept, r)
	}
	s.releases = kept
	return freed
}

// nextRelease is when the next hold ends; +Inf with none.
func (s *simulator) nextRelease() float64 {
	t := math.Inf(1)
	for _, r := range s.releases {
		t = min(t, r.at)
	}
	return t
}

// handOver keeps back the starts that need held GPUs, and records when
// each kept-back job first waited, for the handover time.
func (s *simulator) handOver(starts []sched.Start) []sched.Start {
	if len(s.releases) == 0 {
		return starts
	}
	held := make(map[sched.GPURef]int64)
	heldN := 0
	first := math.Inf(1)
	for _, r := range s.releases {
		for _, g := range r.gpus {
			held[g] = r.job
		}
		heldN += r.n
		first = min(first, r.since)
	}
	now, waits := sched.HandOver(starts, held)
	for _, w := range waits {
		if _, ok := s.waitingSince[w.JobID]; !ok {
			s.waitingSince[w.JobID] = first
		}
	}
	// Count mode: what is free must cover each start.
	out := now[:0]
	free := s.gpus.free
	for _, st := range now {
		j := s.byID[st.JobID]
		if len(st.GPUs) == 0 && j != nil && j.tj.GPUs > free {
			if _, ok := s.waitingSince[st.JobID]; !ok {
				s.waitingSince[st.JobID] = first
			}
			continue
		}
		if len(st.GPUs) == 0 && j != nil {
			free -= j.tj.GPUs
		}
		out = append(out, st)
	}
	return out
}

// startedAfterHandover records the handover time of a job that waited
// for held GPUs.
func (s *simulator) startedAfterHandover(id int64) {
	if since, ok := s.waitingSince[id]; ok {
		delete(s.waitingSince, id)
		s.handovers++
		s.handoverS += s.now - since
	}
}
