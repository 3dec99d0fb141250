package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/spf13/cobra"
)

// Slurm's sacct for its users: "gpuportal sacct" lists jobs, finished or
// not, with sacct's --format fields where gpuportal has them
// (docs/slurm.md, "sacct").

// sacctDefault is sacct's default format.
const sacctDefault = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"

// sacctField is one of sacct's fields: its name as sacct writes it in
// its header, its default width, and its value.
type sacctField struct {
	name  string
	width int
	value func(j api.Job) string
}

var sacctFields = []sacctField{
	{"JobID", 12, squeueID},
	{"JobIDRaw", 12, func(j api.Job) string { return strconv.FormatInt(j.ID, 10) }},
	{"JobName", 10, func(j api.Job) string { return j.Name }},
	{"User", 9, func(j api.Job) string { return j.User }},
	{"Account", 10, func(j api.Job) string { return j.Team }},
	{"Partition", 10, func(j api.Job) string { return j.Team }},
	{"State", 10, func(j api.Job) string { return slurmState(j.State, false) }},
	{"ExitCode", 8, func(j api.Job) string {
		switch {
		case j.ExitCode == nil:
			return "0:0"
		case *j.ExitCode < 0:
			// Ended by a signal: Slurm writes 0:SIGNAL. The signal is the
			// one the run's reason names; 9 where it names none (the run
			// was lost or killed without a word).
			if sig := job.SignalOf(j.Reason); sig > 0 {
				return "0:" + strconv.Itoa(sig)
			}
			return "0:9"
		}
		return strconv.Itoa(*j.ExitCode) + ":0"
	}},
	{"Elapsed", 10, func(j api.Job) string { return slurmDuration(int64(j.ExecutedS)) }},
	{"ElapsedRaw", 10, func(j api.Job) string { return strconv.FormatInt(int64(j.ExecutedS), 10) }},
	{"Timelimit", 10, func(j api.Job) string {
		if j.TimeLimitS == nil {
			return "UNLIMITED"
		}
		return job.FormatTimeLimit(time.Duration(*j.TimeLimitS * float64(time.Second)))
	}},
	{"Submit", 19, func(j api.Job) string { return slurmTimeOr(&j.SubmittedAt, "Unknown") }},
	{"Start", 19, func(j api.Job) string { return slurmTimeOr(j.StartedAt, "Unknown") }},
	{"End", 19, func(j api.Job) string { return slurmTimeOr(j.FinishedAt, "Unknown") }},
	{"NNodes", 8, func(j api.Job) string { return strconv.Itoa(len(placementNodes(j))) }},
	{"NodeList", 15, func(j api.Job) string {
		if len(j.Placement) == 0 {
			return "None assigned"
		}
		return strings.Join(placementNodes(j), ",")
	}},
	{"AllocCPUS", 10, func(j api.Job) string {
		if j.Resources == nil {
			return strconv.FormatInt(j.AllocCPUs, 10) // its last run's, once ended
		}
		var cpus int64
		for _, a := range j.Resources.Allocations {
			cpus += job.WholeCPUs(a.CPUMilli) // what each part is told (job.Resources.Env)
		}
		return strconv.FormatInt(cpus, 10)
	}},
	{"AllocTRES", 20, func(j api.Job) string { return "gres/gpu=" + strconv.Itoa(j.GPUs) }},
	{"ReqTRES", 20, func(j api.Job) string { return "gres/gpu=" + strconv.Itoa(j.GPUs) }},
	{"Reason", 20, func(j api.Job) string { return squeueReason(j.Reason) }},
	{"WorkDir", 20, func(j api.Job) string { return j.Workdir }},
}

// slurmDuration writes seconds as sacct's Elapsed: [D-]HH:MM:SS.
func slurmDuration(s int64) string {
	s = max(s, 0)
	if d := s / 86400; d > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, s%86400/3600, s%3600/60, s%60)
	}
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s%3600/60, s%60)
}

func slurmTimeOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return slurmTime(t)
}

// sacctColumn is a field of a format with its width (negative: left
// justified, as sacct's FIELD%-N... here FIELD%N sets the width).
type sacctColumn struct {
	field sacctField
	width int
}

// parseSacctFormat reads sacct's --format: field names, comma-separated,
// case-insensitive, each with an optional %WIDTH.
func parseSacctFormat(f string) ([]sacctColumn, error) {
	var cols []sacctColumn
	for _, part := range strings.Split(f, ",") {
		name, width, hasWidth := strings.Cut(strings.TrimSpace(part), "%")
		i := slices.IndexFunc(sacctFields, func(sf sacctField) bool { return strings.EqualFold(sf.name, name) })
		if i < 0 {
			names := make([]string, len(sacctFields))
			for k, sf := range sacctFields {
				names[k] = sf.name
			}
			return nil, fmt.Errorf("--format: %q is not a field gpuportal has (%s)", name, strings.Join(names, ", "))
		}
		c := sacctColumn{field: sacctFields[i], width: sacctFields[i].width}
		if hasWidth {
			n, err := strconv.Atoi(width)
			if err != nil || n == 0 || n > 1000 || n < -1000 {
				return nil, fmt.Errorf("--format: %s: want a width such as %%20", part)
			}
			c.width = n
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// writeSacct writes jobs as sacct does: right-justified columns cut to
// their widths under a header and a line of dashes, or with parsable
// their whole values separated by '|'.
func writeSacct(w io.Writer, cols []sacctColumn, jobs []api.Job, parsable, noHeader bool) {
	row := func(value func(c sacctColumn) string) {
		cells := make([]string, len(cols))
		for i, c := range cols {
			v := value(c)
			if !parsable {
				n := c.width
				if n < 0 {
					n = -n
				}
				if len(v) > n {
					v = v[:n-1] + "+"
				}
				if c.width < 0 {
					v += strings.Repeat(" ", n-len(v))
				} else {
					v = strings.Repeat(" ", n-len(v)) + v
				}
			}
			cells[i] = v
		}
		sep := " "
		if parsable {
			sep = "|"
		}
		fmt.Fprintln(w, strings.Join(cells, sep))
	}
	if !noHeader {
		row(func(c sacctColumn) string { return c.field.name })
		if !parsable {
			row(func(c sacctColumn) string { return strings.Repeat("-", max(c.width, -c.width)) })
		}
	}
	for _, j := range jobs {
		row(func(c sacctColumn) string { return c.field.value(j) })
	}
}

// sacctCommand is "gpuportal sacct [-u USER] [-s STATES] [-S TIME] [-E TIME]
// [-j IDS] [-o FORMAT] [-P] [-n]".
func (c jobCmd) sacctCommand() *cobra.Command {
	f := c.flags("sacct [flags]", "list jobs, finished too, as Slurm's sacct does")
	user := f.fs.StringP("user", "u", "", "only this user's jobs")
	states := f.fs.StringP("state", "s", "", "only these states, comma-separated, Slurm's (CD, F, CA, TO, R, PD, ...) or gpuportal's")
	startS := f.fs.StringP("starttime", "S", "", "jobs not ended before this time, YYYY-MM-DD[THH:MM[:SS]] (default: midnight today, as sacct's)")
	endS := f.fs.StringP("endtime", "E", "", "jobs submitted before this time, YYYY-MM-DD[THH:MM[:SS]] (default: now)")
	ids := f.fs.StringP("jobs", "j", "", "only these jobs, comma-separated IDs")
	format := f.fs.StringP("format", "o", sacctDefault, "fields, comma-separated, each with an optional %WIDTH (docs/slurm.md)")
	parsable := f.fs.BoolP("parsable2", "P", false, "fields separated by |, whole")
	noHeader := f.fs.BoolP("noheader", "n", false, "no header")
	return f.run(func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return fmt.Errorf("sacct: unexpected argument %q", pos[0])
		}
		cols, err := parseSacctFormat(*format)
		if err != nil {
			return fmt.Errorf("sacct: %w", err)
		}
		now := c.now()
		y, m, d := now.Date()
		from, to := time.Date(y, m, d, 0, 0, 0, 0, now.Location()), now
		for _, t := range []struct {
			flag, v string
			dst     *time.Time
		}{{"-S", *startS, &from}, {"-E", *endS, &to}} {
			if t.v == "" {
				continue
			}
			if *t.dst, err = parseSlurmTime(t.v, now.Location()); err != nil {
				return fmt.Errorf("sacct: %s %w", t.flag, err)
			}
		}
		var want []job.State
		for _, s := range strings.Split(*states, ",") {
			if s == "" {
				continue
			}
			st, ok := fromSlurmState(s)
			if !ok {
				return fmt.Errorf("sacct: -s %s: unknown state %q (CD, F, CA, TO, R, PD, PR or their long names, or %s)", *states, s, jobStateNames())
			}
			want = append(want, st)
		}
		var only []int64
		var tasks []api.ArrayTask // ARRAY_INDEX, as sacct and squeue write a task
		for _, s := range strings.Split(*ids, ",") {
			if s == "" {
				continue
			}
			arrayID, index, isTask := strings.Cut(strings.TrimSpace(s), "_")
			id, err := strconv.ParseInt(arrayID, 10, 64)
			i, ierr := strconv.Atoi(index)
			if err != nil || id < 1 || (isTask && (ierr != nil || i < 0)) {
				return fmt.Errorf("sacct: -j %s: %q is not a job ID (or ARRAY_INDEX)", *ids, s)
			}
			if isTask {
				tasks = append(tasks, api.ArrayTask{ID: id, Index: i})
				continue
			}
			only = append(only, id)
		}
		asked := func(j api.Job) bool {
			if len(only) == 0 && len(tasks) == 0 {
				return true
			}
			if slices.Contains(only, j.ID) || (j.Array != nil && slices.Contains(only, j.Array.ID)) {
				return true
			}
			return j.Array != nil && slices.ContainsFunc(tasks, func(t api.ArrayTask) bool { return t.ID == j.Array.ID && t.Index == j.Array.Index })
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		all, err := cl.AllJobs(ctx, client.JobQuery{User: *user})
		if err != nil {
			return err
		}
		var jobs []api.Job
		for _, j := range all {
			switch {
			case len(want) > 0 && !slices.Contains(want, j.State),
				!asked(j),
				j.FinishedAt != nil && j.FinishedAt.Before(from),
				j.SubmittedAt.After(to):
				continue
			}
			jobs = append(jobs, j)
		}
		slices.SortStableFunc(jobs, func(a, b api.Job) int { return cmp.Compare(a.ID, b.ID) })
		writeSacct(c.stdout, cols, jobs, *parsable, *noHeader)
		return nil
	})
}

// parseSlurmTime reads a time as sacct's -S and -E take it:
// YYYY-MM-DD, YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS, in loc.
func parseSlurmTime(s string, loc *time.Location) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want YYYY-MM-DD, YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS", s)
}
