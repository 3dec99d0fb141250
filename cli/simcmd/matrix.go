package simcmd

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/spf13/cobra"
)

// matrixTraces is --trace, given once per trace: FILE=CLUSTER,CLUSTER.
type matrixTraces []string

func (m *matrixTraces) String() string { return strings.Join(*m, " ") }

func (m *matrixTraces) Set(v string) error {
	file, clusters, ok := strings.Cut(v, "=")
	if !ok || file == "" || clusters == "" {
		return fmt.Errorf("%q: want FILE=CLUSTER[,CLUSTER...], such as trace.csv=3x8,4x8", v)
	}
	*m = append(*m, v)
	return nil
}

// matrixCommand is `gpuportal sim matrix`: a candidate policy against
// a baseline on every trace, cluster, placement and jittered copy, as a
// markdown table of average pending times (or JSON).
func matrixCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "matrix --trace FILE=CLUSTER,CLUSTER [--trace ...] [--candidate tiresias-g:full-body] [--baseline tiresias-g:reference] [--placement nodes,count] [--jitter-copies 5] [--json]",
		Short: "a candidate policy against a baseline on every trace, cluster, placement and jittered copy",
	}
	fs := flag.NewFlagSet("sim matrix", flag.ContinueOnError)
	var traces matrixTraces
	fs.Var(&traces, "trace", "a trace and the clusters to run it on, `FILE=CLUSTER,CLUSTER` (NODESxGPUS or a node file); once per trace")
	var (
		candidate  = fs.String("candidate", "tiresias-g:"+sched.RuleFullBody, "the `policy` (or policy:rule) to test")
		baseline   = fs.String("baseline", "tiresias-g:"+sched.RuleReference, "the `policy` (or policy:rule) to beat")
		placements = fs.String("placement", sched.PlaceNodes+","+sched.PlaceCount, "comma-separated `placements`: nodes, count")
		copies     = fs.Int("jitter-copies", 5, "besides each trace, its `N` copies jittered with seeds 1 to N (as sim --jitter-seed)")
		asJSON     = fs.Bool("json", false, "print the cells as a JSON array instead of a table")
	)
	cmd.Flags().AddGoFlagSet(fs)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if len(args) > 0 {
			return fmt.Errorf("sim matrix: unexpected argument %q (flags only; see --help)", args[0])
		}
		if len(traces) == 0 {
			return errors.New("sim matrix: --trace is required (FILE=CLUSTER,CLUSTER, once per trace)")
		}
		for name, v := range map[string]string{"candidate": *candidate, "baseline": *baseline} {
			got, err := sim.ParseCandidates(v)
			if err != nil {
				return fmt.Errorf("sim matrix: --%s: %w", name, err)
			}
			if len(got) != 1 {
				return fmt.Errorf("sim matrix: --%s %q: want one policy", name, v)
			}
		}
		if *copies < 0 {
			return fmt.Errorf("sim matrix: --jitter-copies %d: want 0 or more", *copies)
		}
		spec := sim.MatrixSpec{
			Candidate: *candidate, Baseline: *baseline,
			JitterShiftS: simJitterShiftS, JitterScale: simJitterScale,
			Config: sim.Config{Sched: sched.Config{OmitWaits: true}},
		}
		for _, p := range strings.Split(*placements, ",") {
			p = strings.TrimSpace(p)
			if p != sched.PlaceNodes && p != sched.PlaceCount {
				return fmt.Errorf("sim matrix: --placement %q: want %s or %s", p, sched.PlaceNodes, sched.PlaceCount)
			}
			spec.Placements = append(spec.Placements, p)
		}
		for s := 0; s <= *copies; s++ {
			spec.Seeds = append(spec.Seeds, uint64(s))
		}
		for _, t := range traces {
			file, clusters, _ := strings.Cut(t, "=")
			tr, err := trace.ReadFile(file, "")
			if err != nil {
				return fmt.Errorf("sim matrix: --trace: %w", err)
			}
			mt := sim.MatrixTrace{Name: filepath.Base(file), Jobs: tr.Jobs}
			for _, c := range strings.Split(clusters, ",") {
				nodes, err := trace.LoadCluster(strings.TrimSpace(c))
				if err != nil {
					return fmt.Errorf("sim matrix: --trace %s: cluster %q: %w", file, c, err)
				}
				mt.Clusters = append(mt.Clusters, strings.TrimSpace(c))
				mt.Nodes = append(mt.Nodes, nodes)
			}
			spec.Traces = append(spec.Traces, mt)
		}
		cells, err := sim.RunMatrix(ctx, spec)
		if err != nil {
			return fmt.Errorf("sim %w", err)
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(cells)
		}
		return sim.WriteMatrix(stdout, cells, *candidate, *baseline)
	}
	return cmd
}
