package templates

// WhatIf is the what-if page (admins): the replay's form and, once run,
// its report beside what actually happened.
type WhatIf struct {
	Days        string
	Policies    []WhatIfPolicy
	Thresholds  string
	MinRuntimeS string
	HalfLife    string
	Salus       bool
	MaxJobs     int
	MaxDays     int
	// Report is nil until a replay ran.
	Report *WhatIfReport
}

// WhatIfPolicy is one policy (or policy:rule) the form offers.
type WhatIfPolicy struct {
	Name    string
	Checked bool
}

// WhatIfReport is a replay's outcome: a row for what happened, then one
// per policy, with every team's average JCT, and the JCT CDF.
type WhatIfReport struct {
	Summary string
	Teams   []string
	Rows    []WhatIfRow
	CDF     WhatIfCDF
}

// WhatIfRow is one line of the report, its figures formatted.
type WhatIfRow struct {
	Name                             string
	Actual                           bool
	Jobs, Finished, Preemptions      int
	AvgJCT, P95JCT, AvgPending, Util string
	// TeamJCT is the average JCT of each of WhatIfReport.Teams.
	TeamJCT []string
}

// WhatIfCDF is the chart's data: X the JCTs sampled (seconds), Y[i] the
// share of row Labels[i]'s jobs done by then.
type WhatIfCDF struct {
	Labels []string    `json:"labels"`
	X      []float64   `json:"x"`
	Y      [][]float64 `json:"y"`
}
