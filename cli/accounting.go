package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/spf13/cobra"
)

// accountingHelp is what "gpuportal accounting --help" says besides the
// flags.
const accountingHelp = `GPU-hours allocated, used and idle, jobs by outcome and queue waits, per
team or user, as sreport and sacct report them for Slurm. Days are UTC,
as YYYY-MM-DD, both counted; the default is this month so far, by team,
one line per team over the whole range. Researchers see their own usage,
leads their team's, admins everyone's. --csv prints the rows as CSV (the
same as the portal's download), --json the server's JSON.

Example: gpuportal accounting --from 2026-10-01 --to 2026-10-31 --by team`

// accountingCommand is "gpuportal accounting": a client of GET
// /api/v1/accounting.
func (c jobCmd) accountingCommand() *cobra.Command {
	f := c.flags("accounting [flags]", "GPU-hours allocated, used and idle per team or user (like sreport)", "json", "yaml")
	f.cmd.Long = accountingHelp
	// A report over months may take the server a while.
	long := &http.Client{Timeout: 2 * time.Minute}
	if c.http != nil {
		long.Transport = c.http.Transport
	}
	c.http = long
	from := f.fs.String("from", "", "the first UTC day counted, YYYY-MM-DD (default: the first of this month)")
	to := f.fs.String("to", "", "the last UTC day counted, YYYY-MM-DD (default: today)")
	by := f.fs.String("by", "", "a line per team or per user (default: team; user for researchers)")
	period := f.fs.String("period", "range", "a line per day, per month, or one over the range")
	team := f.fs.String("team", "", "only this team")
	user := f.fs.String("user", "", "only this user")
	asCSV := f.fs.Bool("csv", false, "print CSV")
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("accounting", &err)
		if len(pos) > 0 {
			return fmt.Errorf("unexpected argument %q (flags: --from, --to, --by, --period, --team, --user)", pos[0])
		}
		for _, d := range []struct{ flag, v string }{{"from", *from}, {"to", *to}} {
			if d.v == "" {
				continue
			}
			if _, err := time.Parse(time.DateOnly, d.v); err != nil {
				return fmt.Errorf("--%s: %q is not a day as YYYY-MM-DD", d.flag, d.v)
			}
		}
		if *by != "" && *by != "team" && *by != "user" {
			return fmt.Errorf("--by: %q is not team or user", *by)
		}
		if !slices.Contains([]string{"day", "month", "range"}, *period) {
			return fmt.Errorf("--period: %q is not day, month or range", *period)
		}
		if *asCSV && (f.json || f.output != "") {
			return errors.New("--csv and --json (or -o): choose one")
		}
		q := client.AccountingQuery{From: *from, To: *to, By: *by, Period: *period, Team: *team, User: *user}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		if *asCSV {
			raw, err := cl.AccountingCSV(ctx, q)
			if err != nil {
				return err
			}
			_, err = c.stdout.Write(raw)
			return err
		}
		var raw json.RawMessage
		rep, err := cl.Accounting(ctx, q, client.RawJSON(&raw))
		if err != nil {
			return err
		}
		return c.emit(f, raw, nil, func(bool) error { return printAccounting(c.stdout, rep) })
	})
}

// printAccounting writes the report as a table, sreport-like, with a
// total line.
func printAccounting(w io.Writer, rep api.Accounting) error {
	fmt.Fprintf(w, "Accounting of the %s from %s to %s (UTC), by %s, per %s; idle below %g%% utilization\n\n",
		rep.Scope, rep.From, rep.To, rep.By, rep.Period, rep.IdleBelowPct)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "PERIOD\tTEAM\t"
	if rep.By == "user" {
		head += "USER\t"
	}
	fmt.Fprintln(tw, head+"ALLOC GPU-H\tUSED GPU-H\tUSED\tIDLE GPU-H\tIDLE<THR GPU-H\tJOBS DONE\tPREEMPT\tREQUEUE\tRECLAIMED GPU-H\tSTARTED\tWAIT P50\tWAIT P95\t")
	line := func(r api.AccountingRow, team, user string) {
		s := r.Period + "\t" + team + "\t"
		if rep.By == "user" {
			s += user + "\t"
		}
		pct := "-"
		if r.AllocatedGPUHours > 0 {
			pct = fmt.Sprintf("%.0f%%", 100*r.UsedGPUHours/r.AllocatedGPUHours)
		}
		fmt.Fprintf(tw, "%s%.2f\t%.2f\t%s\t%.2f\t%.2f\t%s\t%d\t%d\t%.2f\t%d\t%s\t%s\t\n", s, r.AllocatedGPUHours, r.UsedGPUHours, pct,
			r.IdleGPUHours, r.IdleAllocatedGPUHours, outcomes(r.Jobs), r.PreemptedRuns, r.RequeuedRuns, r.ReclaimedGPUHours, r.JobsStarted,
			fmtSeconds(r.QueueWaitMedianS), fmtSeconds(r.QueueWaitP95S))
	}
	for _, r := range rep.Rows {
		line(r, r.Team, r.User)
	}
	total := rep.Total
	total.Period = "TOTAL"
	line(total, "", "")
	return tw.Flush()
}

// outcomes writes jobs by final state briefly: "3 succeeded, 1 failed".
func outcomes(m map[string]int) string {
	var ks []string
	for k, n := range m {
		if n > 0 {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return "0"
	}
	slices.Sort(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}
