package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TestMatrixFullBody runs a small policy matrix, the 60-job trace and
// its five jittered copies on 1x8 and 2x8 under both placements, and
// requires tiresias-g's full-body, levels and levels-table rules to
// wait less on average than the reference's tiresias-g in every cell
// (docs/scheduling.md, "Beating the reference", has the whole matrix).
// No job of that trace reaches the last queue, so the three rules, which
// differ only there, give the same cells.
func TestMatrixFullBody(t *testing.T) {
	tr, err := trace.ReadFile(sharedTrace(t, "tiresias-60job.csv"), trace.FormatTiresias)
	if err != nil {
		t.Fatal(err)
	}
	mt := MatrixTrace{Name: "tiresias-60job.csv", Jobs: tr.Jobs}
	for _, c := range []string{"1x8", "2x8"} {
		nodes, err := trace.ParseClusterSpec(c)
		if err != nil {
			t.Fatal(err)
		}
		mt.Clusters, mt.Nodes = append(mt.Clusters, c), append(mt.Nodes, nodes)
	}
	for _, rule := range []string{sched.RuleFullBody, sched.RuleLevels, sched.RuleLevelsTable} {
		t.Run(rule, func(t *testing.T) {
			spec := MatrixSpec{
				Traces:       []MatrixTrace{mt},
				Placements:   []string{sched.PlaceNodes, sched.PlaceCount},
				Seeds:        []uint64{0, 1, 2, 3, 4, 5},
				JitterShiftS: 60, JitterScale: 1.25,
				Candidate: "tiresias-g:" + rule, Baseline: "tiresias-g:" + sched.RuleReference,
				Config: Config{Sched: sched.Config{OmitWaits: true}},
			}
			cells, err := RunMatrix(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if len(cells) != 2*2*6 {
				t.Fatalf("%d cells, want 24", len(cells))
			}
			for _, c := range cells {
				if c.Outcome() != "won" {
					t.Errorf("%s %s %s seed %d: avg pending %.1f s, reference %.1f s", c.Trace, c.Cluster, c.Placement, c.Seed, c.Candidate, c.Baseline)
				}
			}
			var b bytes.Buffer
			if err := WriteMatrix(&b, cells, spec.Candidate, spec.Baseline); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, want := range []string{
				"| trace | cluster | placement | original | seed 1 | seed 2 | seed 3 | seed 4 | seed 5 | won / tie / lost |",
				"| tiresias-60job.csv | 1x8 | nodes | 537 / 643 won |",
				"| 6 / 0 / 0 |",
				"24 cells: 24 won, 0 tied, 0 lost",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
			t.Log("\n" + out)
		})
	}
}

// TestMatrixCellOutcome checks the three outcomes and the table's tally
// on cells made by hand.
func TestMatrixCellOutcome(t *testing.T) {
	cells := []MatrixCell{
		{Trace: "t", Cluster: "1x8", Placement: "count", Seed: 0, Candidate: 10, Baseline: 20},
		{Trace: "t", Cluster: "1x8", Placement: "count", Seed: 1, Candidate: 20, Baseline: 20},
		{Trace: "t", Cluster: "1x8", Placement: "count", Seed: 2, Candidate: 1500, Baseline: 1200},
	}
	for i, want := range []string{"won", "tie", "lost"} {
		if got := cells[i].Outcome(); got != want {
			t.Errorf("cell %d: %s, want %s", i, got, want)
		}
	}
	var b bytes.Buffer
	if err := WriteMatrix(&b, cells, "a", "b"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| t | 1x8 | count | 10 / 20 won | 20 / 20 tie | 1,500 / 1,200 lost | 1 / 1 / 1 |",
		"3 cells: 1 won, 1 tied, 1 lost; the candidate's largest ratio to the baseline 1.2500.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRunMatrixRefuses checks that a malformed spec is an error.
func TestRunMatrixRefuses(t *testing.T) {
	if _, err := RunMatrix(context.Background(), MatrixSpec{Placements: []string{"count"}}); err == nil {
		t.Error("no seeds: no error")
	}
	spec := MatrixSpec{Placements: []string{"count"}, Seeds: []uint64{0},
		Traces: []MatrixTrace{{Name: "t", Clusters: []string{"1x8"}}}}
	if _, err := RunMatrix(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "cluster labels") {
		t.Errorf("labels without clusters: %v", err)
	}
}
