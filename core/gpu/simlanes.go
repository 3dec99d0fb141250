package gpu

import "time"

// Simulated jobs that share a GPU through Salus lanes (docs/salus.md)
// hold their persistent memory for the whole run, and their ephemeral
// memory only while an iteration of theirs runs: the agent's gate grants
// one iteration per lane at a time, so the GPU's memory rises and falls
// per lane, as under Salus.

// Gate marks job id, attached, as one whose iterations the caller drives
// with BeginIteration and EndIteration: between them it holds only its
// persistent memory.
func (s *Sim) Gate(id int64) {
	s.update(id, func(j *simJob) { j.gated = true })
}

// BeginIteration starts an iteration of a gated job at now: its
// ephemeral memory builds up over the iteration's forward pass and is
// freed during the backward pass (SimMemory.At over one iteration).
func (s *Sim) BeginIteration(id int64, now time.Time) {
	s.update(id, func(j *simJob) { j.iterStart = now })
}

// EndIteration ends a gated job's iteration: its ephemeral memory is
// freed.
func (s *Sim) EndIteration(id int64) {
	s.update(id, func(j *simJob) { j.iterStart = time.Time{} })
}

// update changes job id on every GPU it is attached to.
func (s *Sim) update(id int64, f func(*simJob)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, js := range s.jobs {
		for i := range js {
			if js[i].id == id {
				f(&js[i])
			}
		}
	}
}

// memAt is the memory the job holds at now.
// utilAt is the job's utilization of its GPU at now: a gated job's only
// while it is in an iteration.
func (j simJob) utilAt(now time.Time) float64 {
	if j.gated && (j.iterStart.IsZero() || now.Before(j.iterStart) || (j.mem.Iteration > 0 && now.Sub(j.iterStart) >= j.mem.Iteration)) {
		return 0
	}
	return j.mem.UtilAt(j.id, now.Sub(j.start))
}

func (j simJob) memAt(now time.Time) int64 {
	if !j.gated {
		return j.mem.At(now.Sub(j.start))
	}
	el := now.Sub(j.iterStart)
	if j.iterStart.IsZero() || el < 0 || (j.mem.Iteration > 0 && el >= j.mem.Iteration) {
		return j.mem.PersistentMiB
	}
	return j.mem.At(el)
}
