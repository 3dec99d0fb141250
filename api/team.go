package api

import "time"

// TeamShare is where a team stands under fair share, with the inputs of
// its factor F = 2^(-U/S) (see docs/fair-share.md). GPUs in use count a
// shared GPU by the share each job holds of it, so the teams' GPUs in use
// never add up to more than the cluster; a team borrows only beyond its
// guarantee.
type TeamShare struct {
	Name            string  `json:"name"`
	GuaranteeGPUs   int     `json:"guaranteed_gpus"`
	Weight          float64 `json:"weight"`
	MaxGPUsPerUser  int     `json:"max_gpus_per_user"`
	InUseGPUs       float64 `json:"in_use_gpus"`
	BorrowedGPUs    float64 `json:"borrowed_gpus"` // max(0, in use - guaranteed)
	UsageGPUSeconds float64 `json:"usage_gpu_s"`
	Entitlement     float64 `json:"entitlement"`       // S: weight over all weights
	UsageShare      float64 `json:"usage_share"`       // U: usage over all usage
	Factor          float64 `json:"fair_share_factor"` // F = 2^(-U/S)
	// DefaultTimeLimitS is the time limit of the team's jobs submitted
	// without one, MaxTimeLimitS the longest one may ask for; 0: none.
	DefaultTimeLimitS int64 `json:"default_time_limit_s"`
	MaxTimeLimitS     int64 `json:"max_time_limit_s"`
	// IdlePolicy is what the portal does with the team's idle jobs
	// (serve --idle-reclaim-grace).
	IdlePolicy IdlePolicy `json:"idle_policy"`
	// SessionPolicy bounds the team's interactive sessions.
	SessionPolicy SessionPolicy `json:"session_policy"`
	// BatchPolicy says which priorities the team's batch jobs may have.
	BatchPolicy BatchPolicy `json:"batch_policy"`
}

// BatchPolicy is a team's policy for its batch jobs' priorities
// (docs/scheduling.md, "Job classes"): which its members may use, and
// how many GPUs its high-priority jobs may ask for at once.
type BatchPolicy struct {
	// Priorities lists the priorities the team's members may give a
	// batch job, of high, normal and low; default normal and low.
	Priorities []string `json:"priorities"`
	// HighGPUs caps the GPUs the team's high-priority jobs may ask for
	// at once, waiting or running: a submission beyond it is refused;
	// 0: no cap.
	HighGPUs int `json:"high_gpus"`
}

// SessionPolicy is a team's policy for its interactive sessions:
// whether its members may start them, how many GPUs they may ask for at
// once, the longest one may run, and how many GPUs its sessions that
// ask for interactive priority may hold with it.
type SessionPolicy struct {
	// Allowed says whether the team's members may start sessions;
	// absent in a request: true. A response always says it.
	Allowed *bool `json:"allowed,omitempty"`
	// MaxGPUs caps the GPUs the team's sessions may ask for at once,
	// waiting or running: a session beyond it is refused; 0 (absent):
	// no cap.
	MaxGPUs int `json:"max_gpus,omitempty"`
	// MaxSessionHours is the longest a session may run (its time
	// limit); 0: no maximum.
	MaxSessionHours float64 `json:"max_session_hours"`
	// PriorityGPUs is how many GPUs the team's sessions may hold with
	// interactive priority; 0: none.
	PriorityGPUs int `json:"priority_gpus"`
}

// SessionsAllowed is p.Allowed, true where absent.
func (p SessionPolicy) SessionsAllowed() bool { return p.Allowed == nil || *p.Allowed }

// IdlePolicy is a team's idle-GPU policy: its own rule for when a job
// is idle, whether its idle sessions and idle batch jobs are stopped
// after the grace, and the longest keep-alive its members may ask for.
type IdlePolicy struct {
	ReclaimSessions   bool    `json:"reclaim_sessions"`
	ReclaimBatch      bool    `json:"reclaim_batch"`
	MaxKeepAliveHours float64 `json:"max_keep_alive_hours"`
	// IdleBelowPct is the team's own idle threshold: a job is idle when
	// all its GPUs stay under this utilization, in percent (above 0, at
	// most 100); null: the server's (serve --idle-below).
	IdleBelowPct *float64 `json:"idle_below_pct"`
	// IdleAfterS is how long, in seconds, they must stay under it (1 to
	// 86400, whole seconds); null or 0: the server's (serve --idle-after).
	IdleAfterS *float64 `json:"idle_after_s"`
}

// Team is a team's page: its standing, members, caps and usage over time.
type Team struct {
	TeamShare
	Members []Member       `json:"members"`
	Samples []TeamSample   `json:"samples"`
	Window  float64        `json:"usage_window_s"`
	Caps    map[string]int `json:"caps"`
	// Warnings are what the team's lead or an admin should act on: jobs
	// holding GPUs idle, queued jobs a cap keeps from starting, and (for
	// admins) guarantees beyond the cluster; absent when none.
	Warnings []string `json:"warnings,omitempty"`
}

// Member is one member's usage of the team's GPUs.
type Member struct {
	User string `json:"user"`
	Role string `json:"role"`
	// UsageGPUSeconds is the attained service of their jobs submitted in
	// the window, runs in progress included.
	UsageGPUSeconds float64 `json:"usage_gpu_s"`
	MaxGPUs         int     `json:"max_gpus"` // their cap; 0 none
}

// MemberShare is one member's standing in the team's fair share at the
// engine's last pass, as the team page shows it to the team's leads and
// admins.
type MemberShare struct {
	User string `json:"user"`
	// UsageGPUSeconds is the member's decayed usage within the team.
	UsageGPUSeconds float64 `json:"usage_gpu_s"`
	// ShareGPUs is the member's equal split of the team's guarantee.
	ShareGPUs float64 `json:"share_gpus"`
	// UsageShare is the member's decayed usage over the members' (0
	// when none used anything).
	UsageShare float64 `json:"usage_share"`
	// Factor is 2^(-UsageShare*n) for n members: the higher, the sooner
	// the member's jobs take the team's slots.
	Factor float64 `json:"factor"`
}

// TeamSample is where the team stood at one time (one a minute).
type TeamSample struct {
	At            time.Time `json:"at"`
	InUseGPUs     float64   `json:"in_use_gpus"`
	BorrowedGPUs  float64   `json:"borrowed_gpus"`
	GuaranteeGPUs int       `json:"guaranteed_gpus"`
}

// TeamTopic is what the team:<name> topic sends: the team's standing and
// the first of its unfinished jobs queue by queue, in the order every
// screen shows within each queue (running ones first, then waiting ones
// in the scheduler's order), with QueueTotal counting them all.
type TeamTopic struct {
	Team TeamShare `json:"team"`
	// Queue is the team's first unfinished jobs (50), running ones
	// first, in the queues' order; QueueTotal counts them all.
	Queue      []TeamQueueJob `json:"queue"`
	QueueTotal int            `json:"queue_total"`
	// AsOf, while a job of the team runs, is when the figures were read:
	// the standing and the queue are of the same moment.
	AsOf *time.Time `json:"as_of,omitempty"`
}

// TeamQueueJob is one of the team's jobs and the priority queue it is in.
type TeamQueueJob struct {
	QueueJob
	Queue int `json:"queue"`
}

// TeamShareUpdate is the body of PATCH /teams/{name} and the team page's
// share form: what an admin changes of a team's share. An absent field
// keeps its value.
type TeamShareUpdate struct {
	GuaranteeGPUs *int     `json:"guaranteed_gpus"`
	Weight        *float64 `json:"weight"`
	// MaxGPUsPerUser caps each member's GPUs; 0: no cap.
	MaxGPUsPerUser *int `json:"max_gpus_per_user"`
}

// UserCap is the body of PUT /teams/{name}/caps/{user} and the team
// page's cap form: the most GPUs a member may hold; 0 removes the cap.
type UserCap struct {
	MaxGPUs *int `json:"max_gpus"`
}

// TimeLimits is the body of PUT /teams/{name}/time-limits and the team
// page's form: the time limit of the team's jobs submitted without one,
// and the longest one may ask for, as job submissions write them
// ("90m", "1-00:00:00"); empty: none.
type TimeLimits struct {
	Default string `json:"default_time_limit"`
	Max     string `json:"max_time_limit"`
}

// CreateTeam is what the admin page's form makes a team of.
type CreateTeam struct {
	Name          string `json:"name"`
	GuaranteeGPUs int    `json:"guaranteed_gpus"`
}
