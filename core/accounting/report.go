package accounting

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/gpuportal/gpuportal/core/jct"
)

// DefaultIdleBelowPct is the GPU utilization, in percent, under which an
// allocated GPU counts idle, unless the server is told otherwise.
const DefaultIdleBelowPct = 5

// By says what a row is about.
type By string

// The groupings of a report.
const (
	ByTeam By = "team"
	ByUser By = "user"
)

// Period says how long a row's time is.
type Period string

// The periods of a report.
const (
	PerDay   Period = "day"
	PerMonth Period = "month"
	// Whole is one row per team or user over the whole range.
	Whole Period = "range"
)

// ParseBy reads a grouping by name.
func ParseBy(s string) (By, error) {
	switch By(s) {
	case ByTeam, ByUser:
		return By(s), nil
	}
	return "", fmt.Errorf("%q is not team or user", s)
}

// ParsePeriod reads a period by name.
func ParsePeriod(s string) (Period, error) {
	switch Period(s) {
	case PerDay, PerMonth, Whole:
		return Period(s), nil
	}
	return "", fmt.Errorf("%q is not day, month or range", s)
}

// Start is the start of the period of p holding day d; for Whole, from.
func (p Period) Start(d Day, from time.Time) time.Time {
	switch p {
	case PerDay:
		return d
	case PerMonth:
		return time.Date(d.Year(), d.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return from
}

// Job is a job as accounting sees it.
type Job struct {
	ID          int64
	Team, User  string
	SubmittedAt time.Time
	// FirstStart is the start of its first run; nil before it.
	FirstStart *time.Time
	// State is the job's state; FinishedAt is set when it is final.
	State      string
	FinishedAt *time.Time
}

// Row is what one team, or one user in one team, consumed in one period
// (Team and User empty: everyone shown).
type Row struct {
	Period     time.Time
	Team, User string
	Usage
	// Outcomes counts the jobs that finished in the period by their
	// final state (succeeded, failed, cancelled, ...).
	Outcomes map[string]int
	// Preempted and Requeued count the runs that ended in the period by
	// being preempted, or put back in the queue (a lost machine, a
	// retried failure, an outgrown lane).
	Preempted, Requeued int
	// ReclaimedGPUSeconds is the idle GPU time given back by the runs
	// that idle reclaim stopped in the period (Run.ReclaimedGPUSeconds,
	// counted on the day of the reclaim): what
	// gpuportal_reclaimed_idle_gpu_seconds_total grew by for them.
	ReclaimedGPUSeconds float64
	// Started counts the jobs whose first run started in the period;
	// QueueWaitMedianS and QueueWaitP95S are their waits from submit to
	// that start, in seconds.
	Started          int
	QueueWaitMedianS float64
	QueueWaitP95S    float64
	waits            []float64
}

// Report is the figures of a range, row by row, with the sum of the rows
// per period and over the whole range.
type Report struct {
	From, To time.Time
	By       By
	Period   Period
	Rows     []Row
	Periods  []Row
	Total    Row
}

// Options say what a report covers.
type Options struct {
	// From and To are UTC day starts: the report covers [From, To).
	From, To time.Time
	By       By
	Period   Period
	// Include says whether a team's or user's figures are shown (the
	// asker's rights); nil shows all.
	Include func(k Key) bool
}

// Build groups measured days (Measure, or stored day rollups) and jobs
// and runs into a report. Each row's figures are sums over the finest
// ones, so rows add up exactly to the periods and to the total; only the
// queue waits, being percentiles, are computed afresh at each level.
func Build(days map[Day]map[Key]Usage, jobs []Job, runs []Run, opt Options) Report {
	rep := Report{From: opt.From, To: opt.To, By: opt.By, Period: opt.Period}
	include := opt.Include
	if include == nil {
		include = func(Key) bool { return true }
	}
	in := func(t time.Time) bool { return !t.Before(opt.From) && t.Before(opt.To) }
	type rk struct {
		period time.Time
		key    Key
	}
	rows := make(map[rk]*Row)
	row := func(t time.Time, k Key) *Row {
		if opt.By == ByTeam {
			k.User = ""
		}
		p := opt.Period.Start(DayOf(t), opt.From)
		r := rows[rk{p, k}]
		if r == nil {
			r = &Row{Period: p, Team: k.Team, User: k.User, Outcomes: map[string]int{}}
			rows[rk{p, k}] = r
		}
		return r
	}
	for d, m := range days {
		if !in(d) {
			continue
		}
		for k, u := range m {
			if include(k) {
				r := row(d, k)
				r.Usage = r.Usage.Add(u)
			}
		}
	}
	for _, j := range jobs {
		k := Key{Team: j.Team, User: j.User}
		if !include(k) {
			continue
		}
		if j.FinishedAt != nil && in(*j.FinishedAt) {
			row(*j.FinishedAt, k).Outcomes[j.State]++
		}
		if j.FirstStart != nil && in(*j.FirstStart) {
			r := row(*j.FirstStart, k)
			r.Started++
			r.waits = append(r.waits, max(j.FirstStart.Sub(j.SubmittedAt).Seconds(), 0))
		}
	}
	for _, rn := range runs {
		k := Key{Team: rn.Team, User: rn.User}
		if rn.ReclaimedAt != nil && in(*rn.ReclaimedAt) && include(k) {
			row(*rn.ReclaimedAt, k).ReclaimedGPUSeconds += rn.ReclaimedGPUSeconds
		}
		if rn.End == nil || !in(*rn.End) || !include(k) {
			continue
		}
		switch rn.State {
		case "preempted":
			row(*rn.End, k).Preempted++
		case "queued":
			row(*rn.End, k).Requeued++
		}
	}
	periods := make(map[time.Time]*Row)
	rep.Total = Row{Period: opt.From, Outcomes: map[string]int{}}
	for _, r := range rows {
		p := periods[r.Period]
		if p == nil {
			p = &Row{Period: r.Period, Outcomes: map[string]int{}}
			periods[r.Period] = p
		}
		for _, into := range []*Row{p, &rep.Total} {
			into.Usage = into.Usage.Add(r.Usage)
			for s, n := range r.Outcomes {
				into.Outcomes[s] += n
			}
			into.Preempted += r.Preempted
			into.Requeued += r.Requeued
			into.ReclaimedGPUSeconds += r.ReclaimedGPUSeconds
			into.Started += r.Started
			into.waits = append(into.waits, r.waits...)
		}
		r.summarizeWaits()
		rep.Rows = append(rep.Rows, *r)
	}
	for _, p := range periods {
		p.summarizeWaits()
		rep.Periods = append(rep.Periods, *p)
	}
	rep.Total.summarizeWaits()
	slices.SortFunc(rep.Rows, func(a, b Row) int {
		return cmp.Or(a.Period.Compare(b.Period), cmp.Compare(a.Team, b.Team), cmp.Compare(a.User, b.User))
	})
	slices.SortFunc(rep.Periods, func(a, b Row) int { return a.Period.Compare(b.Period) })
	return rep
}

func (r *Row) summarizeWaits() {
	slices.Sort(r.waits)
	r.QueueWaitMedianS = jct.Percentile(r.waits, 50)
	r.QueueWaitP95S = jct.Percentile(r.waits, 95)
	r.waits = nil
}

// Idle is the allocated GPU time that samples cover and that was not
// used: Sampled - Used. Time no sample covers is Unsampled, not idle, so
// Allocated = Used + Idle + Unsampled.
func (u Usage) Idle() float64 { return max(u.Sampled-u.Used, 0) }

// Unsampled is the allocated GPU time no sample covers.
func (u Usage) Unsampled() float64 { return max(u.Allocated-u.Sampled, 0) }
