package engine

// A run the engine adopts from a reconnecting agent (AddNode) comes with
// the GPUs it holds on that machine when the agent reports them: then a
// GPU fault counts against the run only on its own GPUs. Older agents do
// not report them, and any GPU of the machine counts (health.go).

// adoptGPUs records the GPUs an adopted run holds on n, when n knows them.
func adoptGPUs(r *run, n Node, job int64) {
	if r.gpus[n.Name()] != nil {
		return // started by this engine: it knows
	}
	rep, ok := n.(RunGPUsReporter)
	if !ok {
		return
	}
	gpus, ok := rep.RunGPUs(job)
	if !ok {
		return
	}
	if r.gpus == nil {
		r.gpus = make(map[string][]int)
	}
	r.gpus[n.Name()] = append([]int{}, gpus...)
}
