package api

// Accounting is what teams or users consumed over a range of UTC days,
// row by row (GET /api/v1/accounting). Rows add up: a team's figures are
// the sum of its users', and Periods and Total the sums of the rows
// shown (for an admin, the cluster's).
type Accounting struct {
	// From and To are the first and last day counted (YYYY-MM-DD, UTC).
	From   string `json:"from"`
	To     string `json:"to"`
	By     string `json:"by"`     // team or user
	Period string `json:"period"` // day, month or range
	// IdleBelowPct is the utilization (percent) under which an
	// allocated GPU counts idle.
	IdleBelowPct float64 `json:"idle_below_pct"`
	// Scope says whose figures are shown: "cluster", "team NAME" or
	// "user NAME".
	Scope   string          `json:"scope"`
	Rows    []AccountingRow `json:"rows"`
	Periods []AccountingRow `json:"periods"`
	Total   AccountingRow   `json:"total"`
}

// AccountingRow is one team's or user's figures over one period (team
// and user empty: the sum of the rows shown).
type AccountingRow struct {
	// Period is the period's first day (YYYY-MM-DD), or its month
	// (YYYY-MM); for a whole range, the range's first day.
	Period string `json:"period"`
	Team   string `json:"team"`
	User   string `json:"user"`
	// AllocatedGPUHours is the GPU time runs held, a shared GPU counted
	// by each job's share of it; runs in progress count up to now.
	AllocatedGPUHours float64 `json:"allocated_gpu_hours"`
	// UsedGPUHours is the allocated time weighted by the GPUs'
	// utilization samples.
	UsedGPUHours float64 `json:"used_gpu_hours"`
	// IdleGPUHours is the allocated time samples cover, minus used
	// (allocated = used + idle + unsampled).
	IdleGPUHours float64 `json:"idle_gpu_hours"`
	// IdleAllocatedGPUHours is the allocated time during which the GPU's
	// utilization was below idle_below_pct.
	IdleAllocatedGPUHours float64 `json:"idle_allocated_gpu_hours"`
	// UnsampledGPUHours is the allocated time no utilization sample
	// covers (counted as not used).
	UnsampledGPUHours float64 `json:"unsampled_gpu_hours"`
	// Jobs counts the jobs that finished in the period by final state.
	Jobs map[string]int `json:"jobs"`
	// PreemptedRuns and RequeuedRuns count the runs that ended in the
	// period by being preempted or put back in the queue.
	PreemptedRuns int `json:"preempted_runs"`
	RequeuedRuns  int `json:"requeued_runs"`
	// ReclaimedGPUHours is the idle GPU time given back by the runs idle
	// reclaim stopped in the period (their GPUs x the time they had been
	// idle, on the day of the reclaim): what
	// gpuportal_reclaimed_idle_gpu_seconds_total grew by for them, in
	// hours.
	ReclaimedGPUHours float64 `json:"reclaimed_gpu_hours"`
	// JobsStarted counts the jobs whose first run started in the period;
	// the queue waits are theirs, submit to first start, in seconds.
	JobsStarted      int     `json:"jobs_started"`
	QueueWaitMedianS float64 `json:"queue_wait_median_s"`
	QueueWaitP95S    float64 `json:"queue_wait_p95_s"`
}

// AccountingQuery is what GET /api/v1/accounting asks, as typed: empty
// fields take their defaults (the month so far, by team, or by user for
// a researcher, per day; every team and user the asker may see).
type AccountingQuery struct {
	From   string `json:"from"`   // the first day, YYYY-MM-DD (UTC)
	To     string `json:"to"`     // the last day, YYYY-MM-DD (UTC)
	By     string `json:"by"`     // team or user
	Period string `json:"period"` // day, month or range
	Team   string `json:"team"`
	User   string `json:"user"`
}
