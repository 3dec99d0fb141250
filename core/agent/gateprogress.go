package agent

import "github.com/gpuportal/gpuportal/core/job"

// gateIterations is the Salus gate's count of a sharing job's iterations
// (gate.Server.Iterations), which its CPU profiling phase reads besides
// its progress lines; nil when the job does not share or the agent
// serves no gate.
func (a *Local) gateIterations(s job.Spec) IterationSource {
	if s.Sharing == nil || a.gate == nil {
		return nil
	}
	g, id := a.gate, s.JobID
	return IterationFunc(func() (int64, bool) { return g.Iterations(id) })
}
