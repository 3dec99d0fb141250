package api

import (
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// Queues is the scheduler's view (GET /api/v1/queues, the queues topic):
// its policy, thresholds and priority queues.
type Queues struct {
	Policy     string    `json:"policy"`
	Thresholds []float64 `json:"thresholds"`
	Queues     []Queue   `json:"queues"`
	// AsOf is when the figures of the running jobs were read.
	AsOf time.Time `json:"as_of"`
}

// Queue is one priority queue of the scheduler with its jobs: running
// ones first, then waiting ones in the order they entered it.
type Queue struct {
	Index int `json:"index"`
	// From and To bound the attained service of its jobs (GPU-seconds;
	// seconds for dlas); To is 0 for the last queue.
	From float64 `json:"from"`
	To   float64 `json:"to"`
	// Total is the number of jobs in the queue, Running those of them
	// that run; Jobs is a page of them, from Offset on (the first page
	// unless another was asked for). NextCursor, when more follow, asks
	// for the next page (GET /queues?cursor=): no job is lost or repeated
	// from page to page while jobs are submitted, start or leave.
	Total      int        `json:"total"`
	Running    int        `json:"running"`
	Offset     int        `json:"offset"`
	NextCursor string     `json:"next_cursor,omitempty"`
	Jobs       []QueueJob `json:"jobs"`
}

// QueueJob is a job in a queue. Jobs of teams the user may not see show
// no name, user or reason.
type QueueJob struct {
	ID    int64     `json:"id"`
	Name  string    `json:"name,omitempty"`
	Team  string    `json:"team"`
	User  string    `json:"user,omitempty"`
	GPUs  int       `json:"gpus"`
	State job.State `json:"state"`
	// ExecutedS and AttainedService include the run in progress, as in Job.
	ExecutedS       float64 `json:"executed_s"`
	AttainedService float64 `json:"attained_service_gpu_s"`
	Borrowed        bool    `json:"borrowed"`
	Reason          string  `json:"reason,omitempty"`
	// Priority is as in Job: a batch job's priority within its team
	// (high, normal or low); absent for a session.
	Priority string `json:"priority,omitempty"`
	// Position is as in Job: the queue's waiting jobs come in this order.
	Position int `json:"position,omitempty"`
	// Forecast is a waiting job's start forecast, as in Job; its reason
	// is left out where Reason is.
	Forecast *Forecast `json:"forecast,omitempty"`
}

// JCTStats summarizes the JCTs of jobs that ended within a window.
type JCTStats struct {
	WindowS float64    `json:"window_s"`
	Jobs    int        `json:"jobs"`
	AvgS    float64    `json:"avg_jct_s"`
	P50S    float64    `json:"p50_jct_s"`
	P95S    float64    `json:"p95_jct_s"`
	P99S    float64    `json:"p99_jct_s"`
	CDF     []CDFPoint `json:"cdf"`
}

// CDFPoint is one point of a CDF: the fraction of jobs with a JCT of at
// most JCTS.
type CDFPoint struct {
	JCTS     float64 `json:"jct_s"`
	Fraction float64 `json:"fraction"`
}
