package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// WriteTable prints results as an aligned table, one row per policy.
func WriteTable(w io.Writer, results []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tjobs\tfinished\tavg JCT s\tp50 s\tp95 s\tp99 s\tavg pending s\tmakespan s\tpreemptions\tof runs < 1 min\tGPU util\twall s\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%.3f\t%.3f\t\n",
			r.Policy, r.Jobs, r.Finished, r.AvgJCT, r.P50JCT, r.P95JCT, r.P99JCT,
			r.AvgPending, r.Makespan, r.Preemptions, r.BriefRuns, r.GPUUtilization, r.WallS)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if err := writeCPUTable(w, results); err != nil {
		return err
	}
	if err := writeClassTable(w, results); err != nil {
		return err
	}
	if err := writeShareTable(w, results); err != nil {
		return err
	}
	if err := writePendingTable(w, results); err != nil {
		return err
	}
	return writeTeamTable(w, results)
}

// writePendingTable prints the starvation measure: one row per policy and
// number of GPUs asked, how long those jobs were pending.
func writePendingTable(w io.Writer, results []*Result) error {
	if !slices.ContainsFunc(results, func(r *Result) bool { return len(r.Pending) > 0 }) {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\treserve after s\treserved jobs\tGPUs\tjobs\tavg pending s\tp99 pending s\tmax pending s\t")
	for _, r := range results {
		rsv := "off"
		if r.ReserveAfterS > 0 {
			rsv = fmt.Sprintf("%.0f", r.ReserveAfterS)
		}
		for _, p := range r.Pending {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t\n",
				r.Policy, rsv, r.ReservedJobs, p.GPUs, p.Jobs, p.AvgS, p.P99S, p.MaxS)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// writeTeamTable prints, for runs with teams, one row per policy and team.
func writeTeamTable(w io.Writer, results []*Result) error {
	teams := false
	for _, r := range results {
		teams = teams || len(r.Teams) > 0
	}
	if !teams {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tfair share\tteam\tguarantee\tjobs\tavg JCT s\tavg pending s\tGPU-s\tborrowed GPU-s\treclaims\treclaimed\tguarantee met\tmax wait within s\tJain\t")
	for _, r := range results {
		fs := "off"
		if r.FairShare {
			fs = "on"
		}
		for i, t := range r.Teams {
			jain := ""
			if i == 0 {
				jain = fmt.Sprintf("%.3f", r.Fairness)
			}
			name := t.Team
			if name == "" {
				name = `""`
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%.3f\t%.0f\t%s\t\n",
				r.Policy, fs, name, t.GuaranteedGPUs, t.Jobs, t.AvgJCT, t.AvgPending,
				t.GPUSeconds, t.BorrowedGPUSeconds, t.Reclaims, t.PreemptedByReclaim,
				t.GuaranteeMet, t.MaxWaitWithinS, jain)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// WriteJSON prints results as a JSON array, one object per policy.
func WriteJSON(w io.Writer, results []*Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(results); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
