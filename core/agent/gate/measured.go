package gate

import "github.com/gpuportal/gpuportal/core/memest"

// Measured returns a job's estimate as its measured peaks corrected it,
// unpadded: P as admitted, E the running average of its ephemeral peaks
// but no less than the largest (memest.Tracker without padding), source
// memest.Measured. ok is false for a job the gate does not hold and for
// one with fewer than memest.MinSamples peaks. The agent reports it when
// the job's run ends, so that its next run starts from it.
func (s *Server) Measured(id int64) (est memest.Estimate, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, held := s.jobs[id]
	if !held || j.seen.Samples() < memest.MinSamples {
		return memest.Estimate{}, false
	}
	return j.seen.Padded(), true
}
