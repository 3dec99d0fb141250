package sim

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/core/trace"
)

// A policy matrix compares a candidate policy with a baseline on every
// cell of traces x clusters x placements x copies (the trace and its
// jittered copies), by average pending time (docs/scheduling.md,
// "Beating the reference").

// MatrixTrace is one trace of a matrix and the clusters it runs on.
type MatrixTrace struct {
	// Name labels the trace in the table.
	Name string
	Jobs []trace.Job
	// Clusters label the clusters, Nodes[i] is Clusters[i]'s nodes.
	Clusters []string
	Nodes    [][]trace.Node
}

// MatrixSpec is a whole matrix.
type MatrixSpec struct {
	Traces []MatrixTrace
	// Placements are sched placements (sched.PlaceNodes, PlaceCount).
	Placements []string
	// Seeds are the copies: 0 is the trace as it is, N > 0 its copy
	// jittered by trace.Jittered with seed N, JitterShiftS and
	// JitterScale.
	Seeds                     []uint64
	JitterShiftS, JitterScale float64
	// Candidate and Baseline are candidates as Compare takes them:
	// policy or policy:rule.
	Candidate, Baseline string
	// Config is the rest of each run's configuration; its policy and
	// placement are set per cell.
	Config Config
}

// MatrixCell is one cell's outcome: both policies' average pending time
// in seconds.
type MatrixCell struct {
	Trace     string  `json:"trace"`
	Cluster   string  `json:"cluster"`
	Placement string  `json:"placement"`
	Seed      uint64  `json:"seed"`
	Candidate float64 `json:"candidate_avg_pending_s"`
	Baseline  float64 `json:"baseline_avg_pending_s"`
}

// Outcome is "won" when the candidate waits less, "tie" when the same,
// "lost" when more.
func (c MatrixCell) Outcome() string {
	switch {
	case c.Candidate < c.Baseline:
		return "won"
	case c.Candidate == c.Baseline:
		return "tie"
	}
	return "lost"
}

// RunMatrix runs every cell of spec, in the order of its traces,
// clusters, placements and seeds. A run that leaves jobs unfinished is
// an error: its average would not be comparable.
func RunMatrix(ctx context.Context, spec MatrixSpec) ([]MatrixCell, error) {
	if len(spec.Seeds) == 0 || len(spec.Placements) == 0 {
		return nil, fmt.Errorf("matrix: no seeds or no placements")
	}
	var out []MatrixCell
	for _, tr := range spec.Traces {
		if len(tr.Clusters) != len(tr.Nodes) {
			return nil, fmt.Errorf("matrix: trace %s: %d cluster labels for %d clusters", tr.Name, len(tr.Clusters), len(tr.Nodes))
		}
		for _, seed := range spec.Seeds {
			jobs := tr.Jobs
			if seed != 0 {
				jobs = trace.Jittered(jobs, seed, spec.JitterShiftS, spec.JitterScale)
			}
			for ci, nodes := range tr.Nodes {
				for _, pl := range spec.Placements {
					cfg := spec.Config
					cfg.Nodes = nodes
					cfg.Sched.Placement = pl
					res, err := Compare(ctx, jobs, cfg, []string{spec.Candidate, spec.Baseline})
					if err != nil {
						return nil, fmt.Errorf("matrix: %s on %s, %s, seed %d: %w", tr.Name, tr.Clusters[ci], pl, seed, err)
					}
					for _, r := range res {
						if r.Finished < r.Jobs {
							return nil, fmt.Errorf("matrix: %s on %s, %s, seed %d: %s finished %d of %d jobs", tr.Name, tr.Clusters[ci], pl, seed, r.Policy, r.Finished, r.Jobs)
						}
					}
					out = append(out, MatrixCell{Trace: tr.Name, Cluster: tr.Clusters[ci], Placement: pl, Seed: seed,
						Candidate: res[0].AvgPending, Baseline: res[1].AvgPending})
				}
			}
		}
	}
	return out, nil
}

// WriteMatrix prints cells as a markdown table: one row per trace,
// cluster and placement, one column per copy, each cell "candidate /
// baseline" average pending seconds with the candidate's outcome, then
// the row's tally; and a last line with the whole matrix's tally and the
// candidate's largest ratio to the baseline.
func WriteMatrix(w io.Writer, cells []MatrixCell, candidate, baseline string) error {
	type rowKey struct{ trace, cluster, placement string }
	var rows []rowKey
	byRow := map[rowKey][]MatrixCell{}
	var seeds []uint64
	seen := map[uint64]bool{}
	for _, c := range cells {
		k := rowKey{c.Trace, c.Cluster, c.Placement}
		if _, ok := byRow[k]; !ok {
			rows = append(rows, k)
		}
		byRow[k] = append(byRow[k], c)
		if !seen[c.Seed] {
			seen[c.Seed] = true
			seeds = append(seeds, c.Seed)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Average pending seconds, %s / %s (won: lower; tie: equal; lost: higher).\n\n", candidate, baseline)
	b.WriteString("| trace | cluster | placement |")
	for _, s := range seeds {
		if s == 0 {
			b.WriteString(" original |")
		} else {
			fmt.Fprintf(&b, " seed %d |", s)
		}
	}
	b.WriteString(" won / tie / lost |\n| --- | --- | --- |")
	for range seeds {
		b.WriteString(" ---: |")
	}
	b.WriteString(" --- |\n")
	tally := map[string]int{}
	worst := 0.0
	for _, k := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s |", k.trace, k.cluster, k.placement)
		row := map[string]int{}
		for _, s := range seeds {
			c, ok := cellOf(byRow[k], s)
			if !ok {
				b.WriteString(" |")
				continue
			}
			o := c.Outcome()
			row[o]++
			tally[o]++
			if c.Baseline > 0 {
				worst = max(worst, c.Candidate/c.Baseline)
			}
			fmt.Fprintf(&b, " %s / %s %s |", fmtSeconds(c.Candidate), fmtSeconds(c.Baseline), o)
		}
		fmt.Fprintf(&b, " %d / %d / %d |\n", row["won"], row["tie"], row["lost"])
	}
	fmt.Fprintf(&b, "\n%d cells: %d won, %d tied, %d lost; the candidate's largest ratio to the baseline %.4f.\n",
		len(cells), tally["won"], tally["tie"], tally["lost"], worst)
	_, err := io.WriteString(w, b.String())
	return err
}

func cellOf(cells []MatrixCell, seed uint64) (MatrixCell, bool) {
	for _, c := range cells {
		if c.Seed == seed {
			return c, true
		}
	}
	return MatrixCell{}, false
}

// fmtSeconds writes a whole number of seconds with thousands separators.
func fmtSeconds(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
