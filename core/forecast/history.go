package forecast

import (
	"math"
	"sort"
	"strconv"

	"github.com/gpuportal/gpuportal/core/sched"
)

// Sample is one finished job: who ran what, and how long it held its
// GPUs in all (its executed time over every run). Jobs that failed or
// were cancelled while running count as much as jobs that succeeded: what
// a forecast needs is when GPUs come free, not whether the work was good.
// LimitS is the time limit the job declared, 0 for none; GPUs the GPUs
// it asked for, 0 when not known.
type Sample struct {
	User, Team, Model string
	RunS              float64
	LimitS            float64
	GPUs              int
}

// DefaultMinGroup is how many finished jobs a group (a user's jobs of one
// model, a user's, a model's, a team's) needs, beyond the time a job has
// already run, before its run times stand for the job's; below it the
// next, broader group is used, and last every finished job.
const DefaultMinGroup = 8

// DefaultMinHistory is how many finished jobs the cluster needs before
// any forecast is made: with fewer, run times are not known at all.
const DefaultMinHistory = 3

// minTail is how many finished jobs, all groups counted, must have run
// longer than a job for their run times to stand for its own.
const minTail = 3

// History is the distribution of finished jobs' run times, overall and by
// group, from which a job's remaining run time is drawn. It is read-only
// once built and safe for concurrent use.
type History struct {
	minGroup int
	all      []float64 // sorted
	alpha    float64   // the tail index of all (hill)
	groups   map[groupKey][]float64
	// limited holds, for the jobs that declared a time limit, the share
	// of it they ran (sorted).
	limited []float64
}

// level is one way of grouping jobs, from the most specific.
type level uint8

const (
	byUserModel level = iota
	byUser
	byModel
	byTeam
	byNone // every job: a group only with a GPU count
	levels
)

// groupKey names a group of jobs: a level and its fields, and the GPUs
// its jobs asked for (0: any).
type groupKey struct {
	level level
	a, b  string
	gpus  int
}

// nkeys is how many groups a job belongs to: each level with its GPU
// count and without (every job, without, is History.all).
const nkeys = 2*int(levels) - 1

// keys are the groups a job of user, team and model on gpus GPUs belongs
// to, most specific first: each level with the job's GPU count, then
// without it (a job on 8 GPUs is seldom like one on 1: on the mixed
// test trace the 8-GPU jobs run 2 to 5 minutes, the 1-GPU ones 30 s to
// 10 minutes, log-uniformly), and last
// the jobs of its GPU count, whoever ran them. A group whose field is
// empty, or a GPU count of 0, is left out (level == levels).
func keys(user, team, model string, gpus int) [nkeys]groupKey {
	var k [nkeys]groupKey
	base := [levels]groupKey{
		byUserModel: {level: byUserModel, a: user, b: model},
		byUser:      {level: byUser, a: user},
		byModel:     {level: byModel, a: model},
		byTeam:      {level: byTeam, a: team},
		byNone:      {level: byNone},
	}
	if user == "" || model == "" {
		base[byUserModel].level = levels
	}
	if user == "" {
		base[byUser].level = levels
	}
	if model == "" {
		base[byModel].level = levels
	}
	if team == "" {
		base[byTeam].level = levels
	}
	for l := range byNone {
		k[2*l], k[2*l+1] = base[l], base[l]
		k[2*l].gpus = gpus
		if gpus <= 0 {
			k[2*l].level = levels
		}
	}
	k[nkeys-1] = base[byNone]
	k[nkeys-1].gpus = gpus
	if gpus <= 0 {
		k[nkeys-1].level = levels
	}
	return k
}

// NewHistory builds the distribution of samples. Samples with a run time
// that is not a positive finite number are left out. minGroup is the
// size a group needs to stand for its jobs (DefaultMinGroup when 0 or
// less).
func NewHistory(samples []Sample, minGroup int) *History {
	if minGroup <= 0 {
		minGroup = DefaultMinGroup
	}
	h := &History{minGroup: minGroup, groups: make(map[groupKey][]float64)}
	for _, s := range samples {
		if !(s.RunS > 0) || math.IsInf(s.RunS, 1) {
			continue
		}
		h.all = append(h.all, s.RunS)
		if s.LimitS > 0 && !math.IsInf(s.LimitS, 1) {
			h.limited = append(h.limited, min(s.RunS/s.LimitS, 1))
		}
		for _, k := range keys(s.User, s.Team, s.Model, s.GPUs) {
			if k.level < levels {
				h.groups[k] = append(h.groups[k], s.RunS)
			}
		}
	}
	sort.Float64s(h.all)
	sort.Float64s(h.limited)
	for _, v := range h.groups {
		sort.Float64s(v)
	}
	h.alpha = hill(h.all)
	return h
}

// Len is the number of finished jobs the history holds.
func (h *History) Len() int {
	if h == nil {
		return 0
	}
	return len(h.all)
}

// Mean is the mean run time, 0 without samples.
func (h *History) Mean() float64 {
	if h.Len() == 0 {
		return 0
	}
	sum := 0.0
	for _, v := range h.all {
		sum += v
	}
	return sum / float64(len(h.all))
}

// Describe says in a few words what the history holds.
func (h *History) Describe() string {
	switch n := h.Len(); n {
	case 0:
		return "no finished job yet"
	case 1:
		return "the run time of 1 finished job"
	default:
		return "the run times of " + strconv.Itoa(n) + " finished jobs"
	}
}

// Remaining is the q-quantile (0 < q < 1) of the remaining run time of
// job j, which has run j.ExecutedS seconds so far. A job with a time
// limit is drawn from the shares of their limits that finished jobs with
// a limit ran, given the share it has used, when 3 of them (minTail, as
// for all jobs' run times; fewer if minGroup is) ran a larger share: a
// limit says more about a job than other jobs' run times. Else it is drawn from the run times of the most specific group
// of finished jobs (the same user and model, the user, the model, the
// team, each first of jobs on as many GPUs as j, then jobs on as many
// GPUs, then all) that has at least minGroup jobs that ran longer than j
// has (for all jobs, 3 are enough).
// A job that has run longer than all but 2 finished jobs is expected to
// run on in proportion to its age, as heavy tails do: the q-quantile of a
// Pareto tail from a, a((1-q)^(-1/alpha) - 1), its index alpha estimated
// from the longest run times (Hill's estimator; History.TailIndex). ok is
// false when the history is empty.
func (h *History) Remaining(j *sched.Job, q float64) (rem float64, ok bool) {
	if h.Len() == 0 {
		return 0, false
	}
	a := max(j.ExecutedS, 0)
	if l := j.TimeLimitS; l > 0 {
		// As few shares as run times of all jobs: what share of its
		// limit a job uses varies less from job to job than how long
		// it runs, and the first jobs to finish are the short ones,
		// whose run times alone made a cluster's first forecasts early.
		if r, ok := tailQuantile(h.limited, a/l, q, min(h.minGroup, minTail)); ok {
			return r * l, true
		}
	}
	for _, k := range keys(j.User, j.Team, j.Model, j.GPUs) {
		if k.level == levels {
			continue
		}
		if v := h.groups[k]; len(v) >= h.minGroup {
			if r, ok := tailQuantile(v, a, q, h.minGroup); ok {
				return r, true
			}
		}
	}
	if r, ok := tailQuantile(h.all, a, q, min(h.minGroup, minTail)); ok {
		return r, true
	}
	q = min(max(q, 0.01), 0.99)
	return a * (math.Pow(1-q, -1/h.alpha) - 1), true
}

// Tail indices: the default, when too few run times say, and the bounds
// of the estimate. An index of 1 is the heaviest tail with a mean (a job
// expected to run as long again as it has); larger ones are lighter.
const (
	defaultAlpha = 2.0
	minAlpha     = 1.0
	maxAlpha     = 10.0
)

// TailIndex is the index of the Pareto tail that the longest run times
// follow: Hill's estimator over the longest tenth of them (5 at least),
// within [1, 10]; 2 with fewer than 20 run times.
func (h *History) TailIndex() float64 { return h.alpha }

// hill estimates the tail index of sorted (increasing).
func hill(sorted []float64) float64 {
	n := len(sorted)
	if n < 20 {
		return defaultAlpha
	}
	k := max(5, n/10)
	u := sorted[n-k-1]
	if !(u > 0) {
		return defaultAlpha
	}
	sum := 0.0
	for _, x := range sorted[n-k:] {
		sum += math.Log(x / u)
	}
	if !(sum > 0) {
		return maxAlpha
	}
	return min(max(float64(k)/sum, minAlpha), maxAlpha)
}

// tailQuantile is the q-quantile of the samples above a, less a, when at
// least need samples lie above a. sorted is in increasing order.
func tailQuantile(sorted []float64, a, q float64, need int) (float64, bool) {
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i] > a })
	tail := sorted[i:]
	if len(tail) == 0 || len(tail) < need {
		return 0, false
	}
	return quantile(tail, q) - a, true
}

// quantile interpolates linearly between the order statistics of sorted.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(lo)
	return sorted[lo]*(1-f) + sorted[lo+1]*f
}
