// Package accounting computes what teams and users consumed over days and
// months, as sreport and sacct report it for Slurm: GPU-hours allocated
// (runs x GPUs, a shared GPU counted by the share each of its jobs holds,
// as core/usage counts it), GPU-hours used (the GPUs' utilization
// samples, weighted by the same shares), idle GPU-hours, jobs by outcome
// and queue waits. It is pure: the store loads jobs, runs and samples,
// and this package turns them into figures that add up (a team's are the
// sum of its users', the cluster's the sum of its teams').
package accounting

import (
	"slices"
	"sort"
	"time"

	"github.com/gpuportal/gpuportal/core/usage"
)

// Run is one run of a job as accounting sees it.
type Run struct {
	Job        int64
	Team, User string
	// GPUs names the GPUs it ran on ("node:index"), each once.
	GPUs []string
	// Sharing and Fraction are the job's (usage.Run).
	Sharing  bool
	Fraction float64
	Start    time.Time
	// End is nil while the run is in progress: it counts up to now.
	End *time.Time
	// State is the state the job moved to when the run ended (preempted,
	// queued for a requeue, or a final state); empty while it runs.
	State string
	// ReclaimedAt is when the portal stopped the run because its GPUs
	// sat idle (idle reclaim), nil if it did not; ReclaimedGPUSeconds is
	// what that gave back (its GPUs x the time they had been idle).
	ReclaimedAt         *time.Time
	ReclaimedGPUSeconds float64
}

// Sample is one stored bucket of a GPU's history: its average
// utilization, from 0 to 1, over [Start, Start+Step).
type Sample struct {
	GPU   string // "node:index"
	Start time.Time
	Step  time.Duration
	Util  float64
}

// Key names whose figures a row holds: a team, or a user within a team.
type Key struct {
	Team, User string
}

// Usage is GPU time over one day, in GPU-seconds.
type Usage struct {
	// Allocated is the GPU time runs held.
	Allocated float64
	// Used is the allocated time weighted by the GPU's utilization.
	Used float64
	// Sampled is the part of Allocated that utilization samples cover;
	// Allocated - Sampled is time no sample says anything of: neither
	// used nor idle (Unsampled).
	Sampled float64
	// IdleAllocated is the part of Sampled during which the GPU's
	// utilization was below the idle threshold.
	IdleAllocated float64
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{Allocated: u.Allocated + v.Allocated, Used: u.Used + v.Used,
		Sampled: u.Sampled + v.Sampled, IdleAllocated: u.IdleAllocated + v.IdleAllocated}
}

// Day is the start of a UTC day.
type Day = time.Time

// DayOf is the UTC day holding t.
func DayOf(t time.Time) Day {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Measure computes, for each UTC day in [from, to) and each team and user
// with runs in it, the GPU time their runs held and used, counting runs
// in progress up to now. from and to are day starts. On each GPU, the
// jobs on it hold shares as usage.Of counts them at each moment (a
// non-sharing job the whole GPU, sharing jobs their fraction or an even
// split), and each share is weighted by the GPU's utilization in the
// samples covering that moment; idleBelow (0 to 1) is the utilization
// under which a GPU counts idle.
func Measure(runs []Run, samples []Sample, from, to, now time.Time, idleBelow float64) map[Day]map[Key]Usage {
	out := make(map[Day]map[Key]Usage)
	end := to
	if now.Before(end) {
		end = now
	}
	if !from.Before(end) {
		return out
	}
	byGPU := spansByGPU(runs, from, end)
	samplesOf := samplesByGPU(samples, byGPU)
	for g, spans := range byGPU {
		ss := samplesOf[g]
		sort.Slice(ss, func(a, b int) bool { return ss[a].Start.Before(ss[b].Start) })
		// The moments the set of runs on g changes.
		var cuts []time.Time
		for _, sp := range spans {
			cuts = append(cuts, sp.start, sp.end)
		}
		slices.SortFunc(cuts, func(a, b time.Time) int { return a.Compare(b) })
		cuts = slices.CompactFunc(cuts, func(a, b time.Time) bool { return a.Equal(b) })
		keys := make(map[int64]Key)
		for _, sp := range spans {
			r := &runs[sp.run]
			keys[r.Job] = Key{Team: r.Team, User: r.User}
		}
		slices.SortFunc(spans, func(x, y runSpan) int { return x.start.Compare(y.start) })
		var active []runSpan
		next := 0
		for c := 0; c+1 < len(cuts); c++ {
			a, b := cuts[c], cuts[c+1]
			// The runs on g over [a, b): those begun by a and not ended.
			for next < len(spans) && !spans[next].start.After(a) {
				active = append(active, spans[next])
				next++
			}
			active = slices.DeleteFunc(active, func(sp runSpan) bool { return !sp.end.After(a) })
			if len(active) == 0 {
				continue
			}
			on := make([]usage.Run, 0, len(active))
			for _, sp := range active {
				r := &runs[sp.run]
				on = append(on, usage.Run{Job: r.Job, Team: r.Team, GPUs: []string{g}, Sharing: r.Sharing, Fraction: r.Fraction, Since: r.Start})
			}
			measureInterval(out, usage.Of(on, nil).OnGPU(g), keys, ss, a, b, idleBelow)
		}
	}
	return out
}

// runSpan is the part of run (an index of Measure's runs) within the
// days measured.
type runSpan struct {
	run        int
	start, end time.Time
}

// spansByGPU is, for each GPU, the spans of runs on it within [from,
// end).
func spansByGPU(runs []Run, from, end time.Time) map[string][]runSpan {
	byGPU := make(map[string][]runSpan)
	for i := range runs {
		r := &runs[i]
		e := end
		if r.End != nil && r.End.Before(e) {
			e = *r.End
		}
		s := r.Start
		if s.Before(from) {
			s = from
		}
		if !s.Before(e) {
			continue
		}
		for _, g := range r.GPUs {
			byGPU[g] = append(byGPU[g], runSpan{i, s, e})
		}
	}
	return byGPU
}

// samplesByGPU is the samples of each GPU of byGPU, in their order.
func samplesByGPU(samples []Sample, byGPU map[string][]runSpan) map[string][]Sample {
	count := make(map[string]int, len(byGPU))
	for _, s := range samples {
		count[s.GPU]++
	}
	samplesOf := make(map[string][]Sample, len(byGPU))
	for _, s := range samples {
		if _, ok := byGPU[s.GPU]; ok {
			if samplesOf[s.GPU] == nil {
				samplesOf[s.GPU] = make([]Sample, 0, count[s.GPU])
			}
			samplesOf[s.GPU] = append(samplesOf[s.GPU], s)
		}
	}
	return samplesOf
}

// measureInterval adds to out the usage of one GPU over [a, b), which
// holds (by job, keys giving each job's team and user) share throughout,
// from its samples ss in start order. It walks [a, b) in pieces that
// cross no day boundary and no sample boundary, summing per GPU-second
// first and sharing out per day.
func measureInterval(out map[Day]map[Key]Usage, holds []usage.Holding, keys map[int64]Key, ss []Sample, a, b time.Time, idleBelow float64) {
	day := DayOf(a)
	var sum Usage // of one whole GPU
	flush := func() {
		for _, h := range holds {
			addUsage(out, day, keys[h.Job], Usage{Allocated: h.Share * sum.Allocated, Used: h.Share * sum.Used,
				Sampled: h.Share * sum.Sampled, IdleAllocated: h.Share * sum.IdleAllocated})
		}
		sum = Usage{}
	}
	// The first sample that ends after a.
	i := sort.Search(len(ss), func(i int) bool { return ss[i].Start.Add(ss[i].Step).After(a) })
	for t := a; t.Before(b); {
		if d := DayOf(t); !d.Equal(day) {
			flush()
			day = d
		}
		next := day.AddDate(0, 0, 1)
		if b.Before(next) {
			next = b
		}
		for i < len(ss) && !ss[i].Start.Add(ss[i].Step).After(t) {
			i++
		}
		util, sampled := 0.0, false
		if i < len(ss) && !ss[i].Start.After(t) {
			util, sampled = min(max(ss[i].Util, 0), 1), true
			if e := ss[i].Start.Add(ss[i].Step); e.Before(next) {
				next = e
			}
		} else if i < len(ss) && ss[i].Start.Before(next) {
			next = ss[i].Start
		}
		dt := next.Sub(t).Seconds()
		sum.Allocated += dt
		if sampled {
			sum.Sampled += dt
			sum.Used += util * dt
			if util < idleBelow {
				sum.IdleAllocated += dt
			}
		}
		t = next
	}
	flush()
}

// addUsage adds u to k's usage on day in out.
func addUsage(out map[Day]map[Key]Usage, day Day, k Key, u Usage) {
	m := out[day]
	if m == nil {
		m = make(map[Key]Usage)
		out[day] = m
	}
	m[k] = m[k].Add(u)
}
