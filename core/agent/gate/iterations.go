package gate

// Iterations returns how many iterations job id has finished through the
// gate, as the lanes of its first GPU count them (every iteration holds a
// lane on each of the job's GPUs, so one GPU's count is the job's). ok is
// false for a job the gate does not hold, one not admitted to its lanes
// yet, and one that has finished no iteration. The agent's profiling
// phase measures a sharing job's rate with it (docs/synergy.md).
func (s *Server) Iterations(id int64) (n int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, held := s.jobs[id]
	if !held || len(j.GPUs) == 0 {
		return 0, false
	}
	for _, gv := range s.pools[j.GPUs[0]].View() {
		for _, l := range gv.Lanes {
			for _, jv := range l.Jobs {
				if jv.ID == id {
					return jv.Iterations, jv.Iterations > 0
				}
			}
		}
	}
	return 0, false
}
