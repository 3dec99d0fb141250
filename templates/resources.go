package templates

// ResourceRow is a running job's CPUs and memory on one node: allocated,
// its proportional share, used, and why.
type ResourceRow struct {
	Node, Allocated, Share, Used, Reason, Note string
}

// ProfileCurve is what the job page's profile chart draws: speed against
// cores per GPU, and where the job's allocation puts it.
type ProfileCurve struct {
	CPU              [][2]float64 `json:"cpu"`
	AllocCoresPerGPU float64      `json:"alloc"`
}
