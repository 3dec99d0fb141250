package sim

import (
	"math"
	"slices"

	"github.com/gpuportal/gpuportal/core/jct"
)

// Result is how one policy did over one trace. Times are in seconds.
type Result struct {
	Policy string `json:"policy"`
	// Rule is the rule the policy followed where it has a choice
	// (sched.PolicyRules): preempted-first, reference, full-index, ...
	Rule     string `json:"rule,omitempty"`
	Jobs     int    `json:"jobs"`
	Finished int    `json:"finished"`
	// JCT (job completion time) is finish minus submit, over finished jobs.
	AvgJCT float64 `json:"avg_jct_s"`
	P50JCT float64 `json:"p50_jct_s"`
	P95JCT float64 `json:"p95_jct_s"`
	P99JCT float64 `json:"p99_jct_s"`
	// AvgPending is JCT minus duration, averaged: time spent waiting,
	// preempted, or restoring after a preemption.
	AvgPending float64 `json:"avg_pending_s"`
	// Makespan is the last finish minus the first submit.
	Makespan    float64 `json:"makespan_s"`
	Preemptions int     `json:"preemptions"`
	// BriefRuns counts the preemptions of runs that had run less than
	// BriefRunS: work started only to be stopped at once (a backfill
	// started just before its reservation took the GPUs, say).
	BriefRuns int `json:"brief_runs"`
	// Handovers counts starts kept back while a preempted job still held
	// the GPUs (Config.HandoverS), and HandoverMeanS is their mean time
	// from the preemption to the start.
	Handovers     int     `json:"handovers,omitempty"`
	HandoverMeanS float64 `json:"handover_mean_s,omitempty"`
	// GPUUtilization is the GPU-seconds during which a GPU hosts a job (a
	// shared GPU counted once) over GPUs x makespan, in [0, 1].
	GPUUtilization float64 `json:"gpu_utilization"`
	// Passes counts the scheduling passes the run made.
	Passes int `json:"passes"`
	// WallS is how long the simulation took on the wall clock.
	WallS float64 `json:"wall_s"`
	// Teams reports every team, when the run had teams (Config.Teams).
	Teams []TeamResult `json:"teams,omitempty"`
	// Fairness is Jain's index, across the teams that guarantee GPUs, of
	// usage over share, both capped by demand (TeamResult.GuaranteeMet),
	// in (0, 1]: 1 when every team got the same share of the guarantee it
	// wanted. 0 without teams.
	Fairness float64 `json:"fairness_jain,omitempty"`
	// UsageFairness is Jain's index of GPU-seconds used over guaranteed
	// GPUs, uncapped. When every job finishes it only reflects demand.
	UsageFairness float64 `json:"usage_fairness_jain,omitempty"`
	// FairShare tells whether the scheduler applied fair share.
	FairShare bool `json:"fair_share,omitempty"`
	// Classes reports sessions and batch jobs apart, when the trace has
	// sessions.
	Classes *ClassResult `json:"classes,omitempty"`
	// Sharing is "salus" when fractional jobs shared GPUs (Config.Sharing);
	// SharingJobs counts the jobs that could share, CoLocations the starts
	// on a GPU that already hosted a job, and MaxJobsPerGPU the most jobs
	// on one GPU at once. JobsPerBusyGPU is the job GPU-seconds held over
	// the GPU-seconds during which a GPU hosts any job: 1 without sharing.
	// GPUUtilization counts a shared GPU once.
	Sharing     string `json:"sharing,omitempty"`
	SharingJobs int    `json:"sharing_jobs,omitempty"`
	// LanePolicy is the lane policy the shared GPUs' turns went by
	// (Config.LanePolicy).
	LanePolicy string `json:"lane_policy,omitempty"`
	// SharePlacement is where a sharing job went (sched.Config's
	// SharePlacement: free-first or fullest-first).
	SharePlacement string  `json:"share_placement,omitempty"`
	CoLocations    int     `json:"co_locations,omitempty"`
	MaxJobsPerGPU  int     `json:"max_jobs_per_gpu,omitempty"`
	JobsPerBusyGPU float64 `json:"jobs_per_busy_gpu,omitempty"`
	// CPU reports CPU and memory allocation when the run modelled it
	// (Config.Sched.CPUAlloc set).
	CPU *CPUResult `json:"cpu,omitempty"`
	// Pending is the starvation measure: for each number of GPUs the
	// jobs asked for, how long its finished jobs were pending (JCT minus
	// duration: waiting, preempted, restoring), at most and at the 99th
	// percentile. Big jobs starve where small ones keep taking GPUs as
	// they free (docs/scheduling.md, "Reservations").
	Pending []PendingByGPUs `json:"pending_by_gpus,omitempty"`
	// ReserveAfterS is the scheduler's reservation bound
	// (sched.Config.ReserveAfterS), 0 when off; ReservedJobs counts the
	// jobs that held a reservation in some pass.
	ReserveAfterS float64 `json:"reserve_after_s,omitempty"`
	ReservedJobs  int     `json:"reserved_jobs,omitempty"`
	// JCTs are the finished jobs' completion times, ascending.
	JCTs []float64 `json:"-"`
}

// PendingByGPUs is how long the finished jobs of one size were pending.
type PendingByGPUs struct {
	GPUs int     `json:"gpus"`
	Jobs int     `json:"jobs"`
	AvgS float64 `json:"avg_s"`
	P99S float64 `json:"p99_s"`
	MaxS float64 `json:"max_s"`
}

// pendingByGPUs groups the finished jobs' pending times by the GPUs they
// asked for, smallest first.
func pendingByGPUs(jobs []job) []PendingByGPUs {
	by := map[int][]float64{}
	for i := range jobs {
		j := &jobs[i]
		if j.done {
			by[j.tj.GPUs] = append(by[j.tj.GPUs], max(0, j.finish-j.tj.Submit-j.tj.Duration))
		}
	}
	sizes := make([]int, 0, len(by))
	for g := range by {
		sizes = append(sizes, g)
	}
	slices.Sort(sizes)
	out := make([]PendingByGPUs, 0, len(sizes))
	for _, g := range sizes {
		v := by[g]
		slices.Sort(v)
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		out = append(out, PendingByGPUs{GPUs: g, Jobs: len(v), AvgS: sum / float64(len(v)),
			P99S: jct.Percentile(v, 99), MaxS: v[len(v)-1]})
	}
	return out
}

func (s *simulator) result() *Result {
	r := &Result{
		Policy:      s.cfg.Sched.Policy,
		Rule:        s.rule,
		Jobs:        len(s.jobs),
		Finished:    s.done,
		Preemptions: s.preemptions,
		BriefRuns:   s.briefRuns,
		Passes:      s.passes,
		Handovers:   s.handovers,
	}
	if s.handovers > 0 {
		r.HandoverMeanS = s.handoverS / float64(s.handovers)
	}
	if len(s.jobs) == 0 {
		return r
	}
	r.JCTs = make([]float64, 0, s.done)
	first, last := s.jobs[0].tj.Submit, s.jobs[0].tj.Submit
	var sumJCT, sumPending float64
	for i := range s.jobs {
		j := &s.jobs[i]
		if !j.done {
			continue
		}
		jct := j.finish - j.tj.Submit
		r.JCTs = append(r.JCTs, jct)
		sumJCT += jct
		sumPending += jct - j.tj.Duration
		last = max(last, j.finish)
	}
	if s.done > 0 {
		r.AvgJCT = sumJCT / float64(s.done)
		r.AvgPending = sumPending / float64(s.done)
	}
	slices.Sort(r.JCTs)
	r.P50JCT = jct.Percentile(r.JCTs, 50)
	r.P95JCT = jct.Percentile(r.JCTs, 95)
	r.P99JCT = jct.Percentile(r.JCTs, 99)
	r.Pending = pendingByGPUs(s.jobs)
	r.ReserveAfterS = s.cfg.Sched.ReserveAfterS
	for i := range s.jobs {
		if s.jobs[i].reserved {
			r.ReservedJobs++
		}
	}
	r.Makespan = last - first
	if r.Makespan > 0 {
		r.GPUUtilization = math.Min(1, s.busy/(float64(s.gpus.total)*r.Makespan))
	}
	s.shareResult(r)
	r.Classes = s.classResult()
	if s.cpu != nil {
		r.CPU = s.cpu.result(last)
	}
	if s.teams != nil {
		r.Teams = s.teams.results(s.jobs)
		r.Fairness = jainGuaranteeMet(r.Teams)
		r.UsageFairness = jainUsageOverShare(r.Teams)
		r.FairShare = s.teams.fair
	}
	return r
}
