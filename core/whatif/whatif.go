// Package whatif replays a cluster's own finished jobs under other
// policies and knobs, and sets each outcome beside what actually
// happened: the same figures (average and 95th percentile JCT, average
// pending time, per-team average JCT, GPU utilization) computed the same
// way for the recorded history and for every replay.
//
// The store turns its job rows into Records (models: Store.WhatIfHistory);
// Trace turns Records into a trace the simulator (core/sim) replays, and
// Compare runs the replays. The package is pure: no database, no clock.
package whatif

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/jct"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
)

// Record is one finished job as the cluster ran it.
type Record struct {
	ID    int64
	Name  string
	Team  string
	User  string
	Model string
	GPUs  int
	// GPUMilli is the share of its GPU a sharing job asked for, in
	// thousandths; 1000 (or 0) for whole GPUs.
	GPUMilli  int
	GPUMemMiB int64
	// Submitted, Started (first start) and Finished are when it happened.
	Submitted, Started, Finished time.Time
	// ExecutedS is how long it ran, all its runs together: the work the
	// replay gives it.
	ExecutedS float64
	// TimeLimitS is the time limit it declared; 0: none.
	TimeLimitS  int64
	Preemptions int
	// Class is the job's class as a trace names it (trace.Job.Class):
	// "session" for an interactive session, "" for a batch job.
	Class string
}

// JCT is the record's job completion time, finish minus submit, in seconds.
func (r *Record) JCT() float64 { return r.Finished.Sub(r.Submitted).Seconds() }

// GPU is one GPU the cluster had: its node, its index there and its
// memory (0: unknown).
type GPU struct {
	gpu.Ref
	MemMiB int64
}

// Nodes turns the GPUs seen into the simulator's cluster: one node per
// node name, in name order, with as many GPUs as its highest index seen
// plus one, and the smallest memory seen on it.
func Nodes(gpus []GPU) []trace.Node {
	byName := map[string]*trace.Node{}
	for _, g := range gpus {
		if g.Node == "" || g.Index < 0 {
			continue
		}
		n := byName[g.Node]
		if n == nil {
			n = &trace.Node{Name: g.Node}
			byName[g.Node] = n
		}
		n.GPUs = max(n.GPUs, g.Index+1)
		if g.MemMiB > 0 && (n.GPUMemMiB == 0 || g.MemMiB < n.GPUMemMiB) {
			n.GPUMemMiB = g.MemMiB
		}
	}
	out := make([]trace.Node, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out
}

// Trace turns records into a trace the simulator replays: ordered by
// submit time (then ID), each job submitted at its own offset from the
// first submit and running for the time it ran. Records that never
// started or end before they begin are left out. It returns the jobs and
// the records they came from, index for index.
func Trace(recs []Record) ([]trace.Job, []Record) {
	kept := make([]Record, 0, len(recs))
	for _, r := range recs {
		if r.Started.IsZero() || r.Finished.Before(r.Submitted) || !(r.ExecutedS >= 0) || r.GPUs < 1 {
			continue
		}
		kept = append(kept, r)
	}
	slices.SortStableFunc(kept, func(a, b Record) int {
		return cmp.Or(a.Submitted.Compare(b.Submitted), cmp.Compare(a.ID, b.ID))
	})
	jobs := make([]trace.Job, len(kept))
	for i, r := range kept {
		milli := r.GPUMilli
		if milli <= 0 || milli > 1000 {
			milli = 1000
		}
		jobs[i] = trace.Job{
			ID: r.ID, Name: r.Name,
			Submit:   r.Submitted.Sub(kept[0].Submitted).Seconds(),
			Duration: r.ExecutedS,
			GPUs:     r.GPUs, GPUMilli: milli, GPUMemMiB: r.GPUMemMiB,
			Team: r.Team, User: r.User, Model: r.Model, TimeLimitS: float64(r.TimeLimitS),
			Class: r.Class,
		}
	}
	return jobs, kept
}

// Row is one line of the comparison: what happened, or one replay.
type Row struct {
	// Name is "actual" for the recorded history, else the policy (with
	// ":rule" when the rule is not the policy's default).
	Name     string `json:"name"`
	Actual   bool   `json:"actual"`
	Jobs     int    `json:"jobs"`
	Finished int    `json:"finished"`
	// JCTs in seconds, over finished jobs.
	AvgJCTS float64 `json:"avg_jct_s"`
	P50JCTS float64 `json:"p50_jct_s"`
	P95JCTS float64 `json:"p95_jct_s"`
	// AvgPendingS is JCT minus the time run, averaged: time spent waiting
	// or preempted.
	AvgPendingS float64 `json:"avg_pending_s"`
	// GPUUtilization is the GPU-seconds held over the cluster's GPUs
	// times the makespan (first submit to last finish), in [0, 1].
	GPUUtilization float64 `json:"gpu_utilization"`
	Preemptions    int     `json:"preemptions"`
	// Teams is every team's average JCT: the fairness of the row.
	Teams []TeamRow `json:"teams"`
	// JCTs are the finished jobs' JCTs, ascending (the CDF).
	JCTs []float64 `json:"-"`
}

// TeamRow is one team's figures in a row.
type TeamRow struct {
	Team        string  `json:"team"`
	Jobs        int     `json:"jobs"`
	AvgJCTS     float64 `json:"avg_jct_s"`
	AvgPendingS float64 `json:"avg_pending_s"`
}

// Report is a whole comparison.
type Report struct {
	// Jobs counts the jobs replayed; Dropped those left out for
	// Config.MaxJobs (the oldest).
	Jobs    int `json:"jobs"`
	Dropped int `json:"dropped,omitempty"`
	// TooLarge counts the jobs left out because they need more GPUs than
	// the cluster replayed on has.
	TooLarge int `json:"too_large,omitempty"`
	// Capped says that more jobs finished than the caller read (it sets
	// it).
	Capped bool `json:"capped,omitempty"`
	// From and To are the first submit and the last finish of the jobs.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Nodes and GPUs describe the cluster replayed on.
	Nodes int `json:"nodes"`
	GPUs  int `json:"gpus"`
	// Rows: "actual" first, then one per candidate, in the order asked.
	Rows []Row `json:"rows"`
}

// Config sets up a comparison.
type Config struct {
	// Candidates are the policies to replay under, "policy" or
	// "policy:rule" (sim.SplitCandidate).
	Candidates []string
	// Sim holds the cluster (Nodes), the teams and every knob; its
	// Sched.Policy and Rule are set per candidate.
	Sim sim.Config
	// MaxJobs caps the jobs replayed: beyond it, only the most recently
	// submitted are kept. 0: no cap.
	MaxJobs int
}

// ErrNoJobs is returned when no record can be replayed.
var ErrNoJobs = errors.New("no finished jobs to replay")

// Compare replays recs under each candidate on cfg.Sim.Nodes and returns
// them beside what actually happened. Every team of the records is
// reported; teams missing from cfg.Sim.Teams are replayed with no
// guarantee.
func Compare(ctx context.Context, recs []Record, cfg Config) (*Report, error) {
	if len(cfg.Candidates) == 0 {
		return nil, errors.New("whatif: no policy to replay under")
	}
	jobs, kept := Trace(recs)
	rep := &Report{}
	if cfg.MaxJobs > 0 && len(jobs) > cfg.MaxJobs {
		rep.Dropped = len(jobs) - cfg.MaxJobs
		jobs, kept = jobs[rep.Dropped:], kept[rep.Dropped:]
		// Keep the first submit at time 0.
		off := jobs[0].Submit
		jobs = slices.Clone(jobs)
		for i := range jobs {
			jobs[i].Submit -= off
		}
	}
	rep.Nodes = len(cfg.Sim.Nodes)
	for _, n := range cfg.Sim.Nodes {
		rep.GPUs += n.GPUs
	}
	if rep.GPUs == 0 {
		return nil, errors.New("whatif: the cluster has no GPUs")
	}
	fit := jobs[:0:0]
	fitKept := kept[:0:0]
	for i, j := range jobs {
		if j.GPUs > rep.GPUs {
			rep.TooLarge++
			continue
		}
		fit, fitKept = append(fit, j), append(fitKept, kept[i])
	}
	jobs, kept = fit, fitKept
	if len(jobs) == 0 {
		return nil, ErrNoJobs
	}
	rep.Jobs = len(jobs)
	rep.From = kept[0].Submitted
	for _, r := range kept {
		if r.Finished.After(rep.To) {
			rep.To = r.Finished
		}
	}
	scfg := cfg.Sim
	scfg.Teams = withJobTeams(scfg.Teams, jobs)
	rep.Rows = append(rep.Rows, Actual(kept, rep.GPUs))
	for _, c := range cfg.Candidates {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("whatif: %w", err)
		}
		results, err := sim.Compare(ctx, jobs, scfg, []string{c})
		if err != nil {
			return nil, fmt.Errorf("whatif: replay under %s: %w", c, err)
		}
		rep.Rows = append(rep.Rows, replayRow(results[0]))
	}
	return rep, nil
}

// withJobTeams returns teams followed by every other team the jobs name,
// with no guarantee, so that the replay reports each team.
func withJobTeams(teams []trace.Team, jobs []trace.Job) []trace.Team {
	out := slices.Clone(teams)
	seen := map[string]bool{}
	for _, t := range teams {
		seen[t.Name] = true
	}
	for _, j := range jobs {
		if !seen[j.Team] {
			seen[j.Team] = true
			out = append(out, trace.Team{Name: j.Team})
		}
	}
	return out
}

// Actual computes the figures of what happened to recs on a cluster of
// gpus GPUs, as a replay's are computed: JCT is finish minus submit,
// pending is JCT minus the time run, utilization is the GPU-seconds the
// jobs ran over gpus times the makespan.
func Actual(recs []Record, gpus int) Row {
	row := Row{Name: "actual", Actual: true, Jobs: len(recs), Finished: len(recs)}
	if len(recs) == 0 {
		return row
	}
	type team struct {
		jobs          int
		jct, pendingS float64
	}
	teams := map[string]*team{}
	first, last := recs[0].Submitted, recs[0].Finished
	var pending, gpuSeconds float64
	row.JCTs = make([]float64, 0, len(recs))
	for _, r := range recs {
		j := r.JCT()
		row.JCTs = append(row.JCTs, j)
		pending += j - r.ExecutedS
		gpuSeconds += float64(r.GPUs) * r.ExecutedS
		row.Preemptions += r.Preemptions
		if r.Submitted.Before(first) {
			first = r.Submitted
		}
		if r.Finished.After(last) {
			last = r.Finished
		}
		t := teams[r.Team]
		if t == nil {
			t = &team{}
			teams[r.Team] = t
		}
		t.jobs++
		t.jct += j
		t.pendingS += j - r.ExecutedS
	}
	s := jct.Summarize(row.JCTs)
	row.AvgJCTS, row.P50JCTS, row.P95JCTS = s.Avg, s.P50, s.P95
	row.AvgPendingS = pending / float64(len(recs))
	if span := last.Sub(first).Seconds(); span > 0 && gpus > 0 {
		row.GPUUtilization = math.Min(1, gpuSeconds/(float64(gpus)*span))
	}
	for _, name := range slices.Sorted(maps.Keys(teams)) {
		t := teams[name]
		row.Teams = append(row.Teams, TeamRow{Team: name, Jobs: t.jobs,
			AvgJCTS: t.jct / float64(t.jobs), AvgPendingS: t.pendingS / float64(t.jobs)})
	}
	return row
}

// replayRow turns a simulator result into a row.
func replayRow(r *sim.Result) Row {
	row := Row{Name: r.Policy, Jobs: r.Jobs, Finished: r.Finished, AvgJCTS: r.AvgJCT, P50JCTS: r.P50JCT,
		P95JCTS: r.P95JCT, AvgPendingS: r.AvgPending, GPUUtilization: r.GPUUtilization,
		Preemptions: r.Preemptions, JCTs: r.JCTs}
	for _, t := range r.Teams {
		if t.Jobs == 0 {
			continue
		}
		row.Teams = append(row.Teams, TeamRow{Team: t.Team, Jobs: t.Jobs, AvgJCTS: t.AvgJCT, AvgPendingS: t.AvgPending})
	}
	slices.SortFunc(row.Teams, func(a, b TeamRow) int { return strings.Compare(a.Team, b.Team) })
	return row
}

// TeamNames lists the teams of a report's rows, sorted.
func (r *Report) TeamNames() []string {
	seen := map[string]bool{}
	for _, row := range r.Rows {
		for _, t := range row.Teams {
			seen[t.Team] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// TeamAvgJCT is row's average JCT for team, and whether the team had jobs.
func (row *Row) TeamAvgJCT(team string) (float64, bool) {
	for _, t := range row.Teams {
		if t.Team == team {
			return t.AvgJCTS, true
		}
	}
	return 0, false
}

// WriteTable prints the report: one row per line, "actual" first, with
// the average JCT of every team after the cluster-wide figures.
func WriteTable(w io.Writer, rep *Report) error {
	teams := rep.TeamNames()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "policy\tjobs\tfinished\tavg JCT s\tp95 JCT s\tavg pending s\tGPU util\tpreemptions\t"
	for _, t := range teams {
		head += "team " + cmp.Or(t, `""`) + " avg JCT s\t"
	}
	fmt.Fprintln(tw, head)
	for _, row := range rep.Rows {
		line := fmt.Sprintf("%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.3f\t%d\t", row.Name, row.Jobs, row.Finished,
			row.AvgJCTS, row.P95JCTS, row.AvgPendingS, row.GPUUtilization, row.Preemptions)
		for _, t := range teams {
			if v, ok := row.TeamAvgJCT(t); ok {
				line += fmt.Sprintf("%.0f\t", v)
			} else {
				line += "-\t"
			}
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// CDF samples every row's JCT distribution on one grid of at most points
// JCTs, spaced evenly on a log scale from the shortest JCT of any row to
// the longest: fractions[i][k] is the share of row i's finished jobs
// whose JCT is at most xs[k]. One grid lets a chart draw the rows as
// lines over a shared axis.
func (r *Report) CDF(points int) (xs []float64, fractions [][]float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, row := range r.Rows {
		if n := len(row.JCTs); n > 0 {
			lo, hi = math.Min(lo, row.JCTs[0]), math.Max(hi, row.JCTs[n-1])
		}
	}
	if math.IsInf(lo, 1) || points < 2 {
		return nil, nil
	}
	lo = math.Max(lo, 1e-3) // a log scale starts above 0
	hi = math.Max(hi, lo)
	step := math.Log(hi/lo) / float64(points-1)
	for k := range points {
		x := lo * math.Exp(step*float64(k))
		if k == points-1 {
			x = hi
		}
		if len(xs) > 0 && x <= xs[len(xs)-1] {
			continue
		}
		xs = append(xs, x)
	}
	for _, row := range r.Rows {
		f := make([]float64, len(xs))
		n := len(row.JCTs)
		for k, x := range xs {
			if n > 0 {
				at, _ := slices.BinarySearch(row.JCTs, math.Nextafter(x, math.Inf(1)))
				f[k] = float64(at) / float64(n)
			}
		}
		fractions = append(fractions, f)
	}
	return xs, fractions
}
