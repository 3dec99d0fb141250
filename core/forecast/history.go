package forecast

import (
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/gpuportal/gpuportal/core/sched"
)

// Sample is one job's run time: who ran what, and how long it held its
// GPUs in all (its executed time over every run). Jobs that failed or
// were cancelled while running count as much as jobs that succeeded: what
// a forecast needs is when GPUs come free, not whether the work was good.
// An Ongoing sample is a job that has not finished: RunS is how long it
// has run so far, a lower bound of its run time (a censored sample).
// LimitS is the time limit the job declared, 0 for none.
type Sample struct {
	User, Team, Model string
	RunS              float64
	Ongoing           bool
	LimitS            float64
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

// History is the distribution of run times, overall and by group, from
// which a job's remaining run time is drawn: the Kaplan-Meier estimate
// from finished jobs' run times and, as lower bounds, the time the jobs
// not finished have run so far. Finished jobs alone under-represent the
// long jobs, which are the ones still running when a forecast is made. It
// is read-only once built and safe for concurrent use.
type History struct {
	minGroup int
	samples  []Sample // the valid ones, as given
	finished int
	ongoing  int
	mean     float64 // of the finished run times
	all      dist
	alpha    float64 // the tail index of the finished run times (hill)
	groups   map[groupKey]*dist
	// limited is the distribution of run times over time limits, of the
	// jobs that declared one; limitedN counts the finished ones.
	limited  dist
	limitedN int
}

// dist is the Kaplan-Meier estimate of one group's run times.
type dist struct {
	ev   []float64 // the finished run times, increasing
	surv []float64 // the share of jobs estimated to run longer than each
	// longest is the longest run time, finished or ongoing.
	longest float64
}

// obs is one run time, finished or (ongoing) a lower bound.
type obs struct {
	t       float64
	ongoing bool
}

// newDist estimates the distribution of o, which it sorts.
func newDist(o []obs) *dist {
	slices.SortFunc(o, func(a, b obs) int {
		if c := cmpFloat(a.t, b.t); c != 0 {
			return c
		}
		// A job ongoing at t runs past the jobs that finished at t.
		switch {
		case a.ongoing == b.ongoing:
			return 0
		case b.ongoing:
			return -1
		}
		return 1
	})
	d := &dist{}
	surv := 1.0
	for i, x := range o {
		d.longest = max(d.longest, x.t)
		if x.ongoing {
			continue
		}
		surv *= 1 - 1/float64(len(o)-i) // len(o)-i jobs ran t or longer
		d.ev = append(d.ev, x.t)
		d.surv = append(d.surv, surv)
	}
	return d
}

// survAt is the estimated share of jobs that run longer than the i-th
// finished run time; 1 before the first.
func (d *dist) survAt(i int) float64 {
	if i < 0 {
		return 1
	}
	return d.surv[i]
}

// level is one way of grouping jobs, from the most specific.
type level uint8

const (
	byUserModel level = iota
	byUser
	byModel
	byTeam
	levels
)

type groupKey struct {
	level level
	a, b  string
}

// keys are the groups j belongs to, most specific first; a group whose
// field is empty is left out.
func keys(user, team, model string) [levels]groupKey {
	var k [levels]groupKey
	k[byUserModel] = groupKey{level: byUserModel, a: user, b: model}
	k[byUser] = groupKey{level: byUser, a: user}
	k[byModel] = groupKey{level: byModel, a: model}
	k[byTeam] = groupKey{level: byTeam, a: team}
	if user == "" || model == "" {
		k[byUserModel].level = levels
	}
	if user == "" {
		k[byUser].level = levels
	}
	if model == "" {
		k[byModel].level = levels
	}
	if team == "" {
		k[byTeam].level = levels
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
	h := &History{minGroup: minGroup, groups: make(map[groupKey]*dist)}
	all := make([]obs, 0, len(samples))
	groups := make(map[groupKey][]obs)
	var finished []float64
	var limited []obs
	for _, s := range samples {
		if !(s.RunS > 0) || math.IsInf(s.RunS, 1) {
			continue
		}
		h.samples = append(h.samples, s)
		o := obs{t: s.RunS, ongoing: s.Ongoing}
		if s.LimitS > 0 && !math.IsInf(s.LimitS, 1) {
			limited = append(limited, obs{t: min(s.RunS/s.LimitS, 1), ongoing: s.Ongoing})
			if !s.Ongoing {
				h.limitedN++
			}
		}
		all = append(all, o)
		for _, k := range keys(s.User, s.Team, s.Model) {
			if k.level < levels {
				groups[k] = append(groups[k], o)
			}
		}
		if s.Ongoing {
			h.ongoing++
			continue
		}
		finished = append(finished, s.RunS)
		h.mean += s.RunS
	}
	h.finished = len(finished)
	if h.finished > 0 {
		h.mean /= float64(h.finished)
	}
	h.all = *newDist(all)
	h.limited = *newDist(limited)
	for k, v := range groups {
		h.groups[k] = newDist(v)
	}
	sort.Float64s(finished)
	h.alpha = hill(finished)
	return h
}

// WithOngoing is h with the jobs of jobs that have run, and have not
// finished (they run, or wait after a preemption), as lower bounds of
// their run times: h itself when there are none.
func (h *History) WithOngoing(jobs []sched.Job) *History {
	if h == nil {
		return nil
	}
	samples := slices.Clip(h.samples)
	n := len(samples)
	for i := range jobs {
		if j := &jobs[i]; j.ExecutedS > 0 {
			samples = append(samples, Sample{User: j.User, Team: j.Team, Model: j.Model, RunS: j.ExecutedS, Ongoing: true, LimitS: j.TimeLimitS})
		}
	}
	if len(samples) == n {
		return h
	}
	return NewHistory(samples, h.minGroup)
}

// Len is the number of finished jobs the history holds.
func (h *History) Len() int {
	if h == nil {
		return 0
	}
	return h.finished
}

// Mean is the mean run time of the finished jobs, 0 without any.
func (h *History) Mean() float64 {
	if h.Len() == 0 {
		return 0
	}
	return h.mean
}

// Describe says in a few words what the history holds.
func (h *History) Describe() string {
	var s string
	switch n := h.Len(); n {
	case 0:
		s = "no finished job yet"
	case 1:
		s = "the run time of 1 finished job"
	default:
		s = "the run times of " + strconv.Itoa(n) + " finished jobs"
	}
	if h != nil && h.ongoing > 0 {
		s += " and the time " + strconv.Itoa(h.ongoing) + " unfinished ones have run"
	}
	return s
}

// Remaining is the q-quantile (0 < q < 1) of the remaining run time of
// job j, which has run j.ExecutedS seconds so far. A job with a time
// limit is drawn from the share of their limits the jobs with one ran
// (finished and ongoing, Kaplan-Meier), given the share it has used,
// when minGroup finished jobs with a limit ran a larger share. Else it is
// drawn from the
// distribution of run times (finished and ongoing, Kaplan-Meier) of the
// most specific group of jobs (the same user and model, the user, the
// model, the team, then all) that has at least minGroup finished jobs
// that ran longer than j has (for all jobs, 3 are enough). Where the
// estimate leaves a share of jobs running longer than any finished one
// (ongoing jobs ran longer), that share ends between the longest finished
// run time and the longest run so far (Efron's rule: the longest is taken
// as finished, which bounds the draws by what has been seen). A job that has run longer than all but 2
// finished jobs is expected to run on in proportion to its age, as heavy
// tails do: the q-quantile of a Pareto tail from a,
// a((1-q)^(-1/alpha) - 1), its index alpha estimated from the longest
// finished run times (Hill's estimator; History.TailIndex). ok is false
// when the history holds no finished job.
func (h *History) Remaining(j *sched.Job, q float64) (rem float64, ok bool) {
	if h.Len() == 0 {
		return 0, false
	}
	a := max(j.ExecutedS, 0)
	if l := j.TimeLimitS; l > 0 && h.limitedN >= h.minGroup {
		// What share of their limits jobs use says more than the run
		// times of others.
		if r, ok := h.limited.tailQuantile(a/l, q, h.minGroup); ok {
			return r * l, true
		}
	}
	for _, k := range keys(j.User, j.Team, j.Model) {
		if k.level == levels {
			continue
		}
		if d := h.groups[k]; d != nil && len(d.ev) >= h.minGroup {
			if r, ok := d.tailQuantile(a, q, h.minGroup); ok {
				return r, true
			}
		}
	}
	if r, ok := h.all.tailQuantile(a, q, min(h.minGroup, minTail)); ok {
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

// tailQuantile is the q-quantile of the run times longer than a, less
// a, when at least need finished ones are. Over the finished run times,
// weighted by the estimate, it interpolates between them as quantile
// does (without ongoing jobs, it is quantile of the finished run times
// above a); the share of jobs estimated to run longer than every finished
// one ends between the last finished run time and the longest run so far.
func (d *dist) tailQuantile(a, q float64, need int) (float64, bool) {
	k := sort.SearchFloat64s(d.ev, math.Nextafter(a, math.Inf(1))) // the first finished run time above a
	m := len(d.ev)
	if m-k == 0 || m-k < need {
		return 0, false
	}
	sa := d.survAt(k - 1)
	rest := d.surv[m-1] / sa // the share beyond the last finished run time
	if q > 1-rest {
		// Between the last finished run time and the longest run so far.
		f := (q - (1 - rest)) / rest
		return d.ev[m-1]*(1-f) + max(d.longest, d.ev[m-1])*f - a, true
	}
	if m-k == 1 {
		return d.ev[k] - a, true
	}
	// The i-th finished run time (k <= i < m) sits at pos(i), the weight
	// of those before it over the weight of all but the last: i/(n-1)
	// when all weigh the same, as quantile.
	span := sa - d.surv[m-2]
	pos := func(i int) float64 { return (sa - d.survAt(i-1)) / span }
	q /= 1 - rest
	i := k + sort.Search(m-k, func(x int) bool { return pos(k+x) > q }) - 1
	if i >= m-1 {
		return d.ev[m-1] - a, true
	}
	f := 0.0
	if w := (d.survAt(i-1) - d.surv[i]) / span; w > 0 {
		f = min(max((q-pos(i))/w, 0), 1)
	}
	return d.ev[i]*(1-f) + d.ev[i+1]*f - a, true
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
