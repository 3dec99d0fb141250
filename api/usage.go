package api

import (
	"fmt"
	"strconv"
	"time"
)

// JobUsage is how a job used its GPUs over its current run (or its last,
// once it ended): each GPU's utilization and memory, and whether it holds
// them idle. GET /api/v1/jobs/{id}/usage gives it with its points; the
// job itself (GET /api/v1/jobs/{id}) carries it without.
type JobUsage struct {
	// From and To bound the run: its start, and now or its end.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// UtilAvgPct is the mean utilization of its GPUs over the run, as far
	// as readings reach; nil without any.
	UtilAvgPct *float64   `json:"util_avg_pct"`
	GPUs       []GPUUsage `json:"gpus"`
	// Idle says whether the job holds its GPUs idle; nil unless it runs.
	Idle *Idle `json:"idle,omitempty"`
}

// GPUUsage is one GPU of a job's run.
type GPUUsage struct {
	Node  string `json:"node"`
	Index int    `json:"index"`
	UUID  string `json:"uuid,omitempty"`
	// Shared: other jobs use the GPU too (Salus sharing, SharedWith names
	// them where the agent reported them). Utilization is the whole
	// GPU's, the neighbours' work included.
	Shared     bool    `json:"shared"`
	SharedWith []int64 `json:"shared_with,omitempty"`
	// Simulated: a simulated GPU (serve --sim-gpus, agent --gpus sim:...),
	// whose readings the simulator makes up, whatever the job runs: they
	// are not the job's own processes'.
	Simulated bool `json:"simulated,omitempty"`
	// UtilPct is the latest reading while the job runs; nil otherwise.
	UtilPct *float64 `json:"util_pct"`
	// UtilAvgPct is the mean over the run; nil without readings.
	UtilAvgPct *float64 `json:"util_avg_pct"`
	// MemMiB is the GPU's memory; MemUsedMiB the whole GPU's use at the
	// latest reading; JobMemMiB the job's own part of it where the agent
	// knows it (nil otherwise), and JobMemMaxMiB its peak over the run as
	// far as known.
	MemMiB       int64  `json:"mem_mib"`
	MemUsedMiB   int64  `json:"mem_used_mib"`
	JobMemMiB    *int64 `json:"job_mem_mib"`
	JobMemMaxMiB *int64 `json:"job_mem_max_mib"`
	// Points: the run's readings, oldest first, at most a few hundred
	// (only in GET /api/v1/jobs/{id}/usage).
	Points []UsagePoint `json:"points,omitempty"`
}

// UsagePoint is one GPU's mean readings over [t, t+step): Unix seconds.
type UsagePoint struct {
	T          int64   `json:"t"`
	Step       int64   `json:"step"`
	UtilPct    float64 `json:"util_pct"`
	MemUsedMiB int64   `json:"mem_used_mib"`
	// JobMemMiB is the job's own memory, where the agent reported it
	// (the live window); nil elsewhere.
	JobMemMiB *int64 `json:"job_mem_mib"`
}

// Idle is the idle-GPU verdict on a running job (core/idle): all its
// GPUs under BelowPct utilization for at least AfterS seconds.
type Idle struct {
	Idle bool `json:"idle"`
	// Since is when its GPUs last worked, while they are all low; AtLeast
	// says they were low for all the readings looked at (twice AfterS),
	// so it was earlier still.
	Since   *time.Time `json:"since,omitempty"`
	AtLeast bool       `json:"at_least,omitempty"`
	// Known is false when a GPU has sent no reading lately: nothing is
	// said then.
	Known    bool    `json:"known"`
	AfterS   float64 `json:"after_s"`
	BelowPct float64 `json:"below_pct"`
	// ReclaimAt is when the portal stops the idle job to give its GPUs to
	// waiting jobs (serve --idle-reclaim-grace after it became idle),
	// where the team's policy reclaims its kind; absent otherwise.
	ReclaimAt *time.Time `json:"reclaim_at,omitempty"`
	// KeepAliveUntil: its owner keeps it from being reclaimed until then
	// (POST /api/v1/jobs/{id}/keep-alive); absent when that has passed.
	KeepAliveUntil *time.Time `json:"keep_alive_until,omitempty"`
}

// ReclaimText says when the portal reclaims the idle job, for its page:
// "" when it does not.
func (i *Idle) ReclaimText(now time.Time, loc *time.Location) string {
	if i == nil || i.ReclaimAt == nil {
		return ""
	}
	if !now.Before(*i.ReclaimAt) {
		return "It is being stopped now to give its GPUs to waiting jobs."
	}
	return fmt.Sprintf("It will be stopped at %s (in %s) to give its GPUs to waiting jobs, unless they work again or it is kept alive.", Clock(*i.ReclaimAt, now, loc), roughDuration(i.ReclaimAt.Sub(now)))
}

// Text says since when an idle job's GPUs have been idle, with times in
// loc, as of now ("since 14:05:10 (34m00s): all its GPUs under 5%
// utilization"): what the job, team and cluster pages and `gpuportal job
// show` print after "idle"; "" when the job is not idle.
func (i *Idle) Text(now time.Time, loc *time.Location) string {
	if i == nil || !i.Idle || i.Since == nil {
		return ""
	}
	rule := fmt.Sprintf("all its GPUs under %s%% utilization", strconv.FormatFloat(i.BelowPct, 'f', -1, 64))
	if i.AtLeast {
		return fmt.Sprintf("since before %s (over %s): %s", Clock(*i.Since, now, loc), roughDuration(now.Sub(*i.Since)), rule)
	}
	return fmt.Sprintf("since %s (%s): %s", Clock(*i.Since, now, loc), roughDuration(now.Sub(*i.Since)), rule)
}

// Short says the verdict in a few characters, for a badge: "idle 34m";
// "" when the job is not idle.
func (i *Idle) Short(now time.Time) string {
	if i == nil || !i.Idle || i.Since == nil {
		return ""
	}
	if i.AtLeast {
		return "idle > " + roughDuration(now.Sub(*i.Since))
	}
	return "idle " + roughDuration(now.Sub(*i.Since))
}
