package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/spf13/cobra"
)

// Slurm's squeue for its users: "gpuportal squeue" and "job list
// --format" write jobs as squeue's --format does (docs/slurm.md,
// "squeue"), its fields mapped where gpuportal has them.

// squeueDefault is squeue's default format; squeueStartFormat its
// format with --start.
const (
	squeueDefault     = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
	squeueStartFormat = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
)

// squeueField is one of squeue's %-fields: its header and its value.
type squeueField struct {
	header string
	value  func(j api.Job, v squeueView) string
}

// squeueView is what a job's fields are written with besides the job:
// the time, and the GPUs of each machine that takes jobs, most first
// (nil when not read), for the machines a waiting job needs.
type squeueView struct {
	now      time.Time
	machines []int
}

var squeueFields = map[byte]squeueField{
	'i': {"JOBID", func(j api.Job, _ squeueView) string { return squeueID(j) }},
	'A': {"JOBID", func(j api.Job, _ squeueView) string { return strconv.FormatInt(j.ID, 10) }},
	'F': {"ARRAY_JOB_ID", func(j api.Job, _ squeueView) string {
		if j.Array != nil {
			return strconv.FormatInt(j.Array.ID, 10)
		}
		return strconv.FormatInt(j.ID, 10)
	}},
	'K': {"ARRAY_TASK_ID", func(j api.Job, _ squeueView) string {
		if j.Array != nil {
			return strconv.Itoa(j.Array.Index)
		}
		return "N/A"
	}},
	'j': {"NAME", func(j api.Job, _ squeueView) string { return j.Name }},
	'u': {"USER", func(j api.Job, _ squeueView) string { return j.User }},
	'a': {"ACCOUNT", func(j api.Job, _ squeueView) string { return j.Team }},
	'P': {"PARTITION", func(j api.Job, _ squeueView) string { return j.Team }},
	't': {"ST", func(j api.Job, _ squeueView) string { return slurmState(j.State, true) }},
	'T': {"STATE", func(j api.Job, _ squeueView) string { return slurmState(j.State, false) }},
	'M': {"TIME", func(j api.Job, v squeueView) string { return slurmElapsed(j, v.now) }},
	'l': {"TIME_LIMIT", func(j api.Job, _ squeueView) string {
		if j.TimeLimitS == nil {
			return "UNLIMITED"
		}
		return job.FormatTimeLimit(time.Duration(*j.TimeLimitS * float64(time.Second)))
	}},
	'L': {"TIME_LEFT", func(j api.Job, _ squeueView) string {
		if j.TimeLeftS == nil {
			return "UNLIMITED"
		}
		return job.FormatTimeLimit(time.Duration(*j.TimeLeftS * float64(time.Second)))
	}},
	'D': {"NODES", func(j api.Job, v squeueView) string { n, _ := gpusPerNode(j, v.machines); return strconv.Itoa(n) }},
	'b': {"TRES_PER_NODE", func(j api.Job, v squeueView) string {
		_, g := gpusPerNode(j, v.machines)
		return "gres/gpu:" + strconv.Itoa(g)
	}},
	'N': {"NODELIST", func(j api.Job, _ squeueView) string { return strings.Join(placementNodes(j), ",") }},
	'R': {"NODELIST(REASON)", func(j api.Job, _ squeueView) string {
		if j.State == job.Running {
			return strings.Join(placementNodes(j), ",")
		}
		return "(" + squeueReason(j.Reason) + ")"
	}},
	'r': {"REASON", func(j api.Job, _ squeueView) string { return squeueReason(j.Reason) }},
	'V': {"SUBMIT_TIME", func(j api.Job, _ squeueView) string { return slurmTime(&j.SubmittedAt) }},
	'S': {"START_TIME", func(j api.Job, _ squeueView) string { return slurmTime(squeueStart(j)) }},
	'Y': {"SCHEDNODES", func(j api.Job, _ squeueView) string {
		if j.Reservation == nil || !j.State.Waiting() {
			return "(null)"
		}
		return strings.Join(gpu.PlacementNodes(j.Reservation.GPUs), ",")
	}},
	'e': {"END_TIME", func(j api.Job, _ squeueView) string { return slurmTime(j.FinishedAt) }},
	'Z': {"WORK_DIR", func(j api.Job, _ squeueView) string { return j.Workdir }},
	'o': {"COMMAND", func(j api.Job, _ squeueView) string { return strings.Join(j.Command, " ") }},
}

// squeueStart is a job's start as squeue's %S gives it: when it started,
// or for a waiting job when it is expected to (its forecast's likely
// start, Forecast.Expected); nil for neither.
func squeueStart(j api.Job) *time.Time {
	if j.State.Waiting() {
		return j.Forecast.Expected()
	}
	return j.StartedAt
}

// squeueID is a job's ID as squeue writes it: ARRAYID_INDEX for a task.
func squeueID(j api.Job) string {
	if j.Array != nil {
		return strconv.FormatInt(j.Array.ID, 10) + "_" + strconv.Itoa(j.Array.Index)
	}
	return strconv.FormatInt(j.ID, 10)
}

// slurmStates are gpuportal's states as Slurm writes them: long, then
// compact (squeue's %t).
var slurmStates = map[job.State][2]string{
	job.Queued: {"PENDING", "PD"}, job.Running: {"RUNNING", "R"}, job.Preempted: {"PREEMPTED", "PR"},
	job.Succeeded: {"COMPLETED", "CD"}, job.Failed: {"FAILED", "F"}, job.Cancelled: {"CANCELLED", "CA"},
	job.TimedOut: {"TIMEOUT", "TO"},
}

// slurmState is state as Slurm writes it, compact (squeue's %t) or not.
func slurmState(s job.State, compact bool) string {
	names, ok := slurmStates[s]
	switch {
	case !ok:
		return strings.ToUpper(string(s))
	case compact:
		return names[1]
	}
	return names[0]
}

// slurmElapsed is the job's run time as squeue's %M writes it:
// [days-][hours:]minutes:seconds.
func slurmElapsed(j api.Job, now time.Time) string {
	s := int64(j.ExecutedS)
	if j.State == job.Running && j.StartedAt != nil && j.AsOf != nil {
		s += int64(now.Sub(*j.AsOf).Seconds())
	}
	s = max(s, 0)
	d, h, m, sec := s/86400, s%86400/3600, s%3600/60, s%60
	switch {
	case d > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, sec)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

// slurmTime is a time as Slurm writes it, local, or N/A.
func slurmTime(t *time.Time) string {
	if t == nil {
		return "N/A"
	}
	return t.Local().Format("2006-01-02T15:04:05")
}

// squeueReason is a waiting job's reason on one line, as squeue's
// parenthesised reason; "None" when it has none.
func squeueReason(r string) string {
	r = oneLine(r)
	if r == "" {
		return "None"
	}
	return r
}

// placementNodes are the machines of a job's placement, in order.
func placementNodes(j api.Job) []string { return gpu.PlacementNodes(j.Placement) }

// gpusPerNode is how many machines a job runs on (squeue's %D) and the
// most GPUs it holds on one (%b): those of its placement while it runs,
// of its reservation while it waits with one (the machines it will
// start on), else the fewest machines of the cluster that hold its GPUs,
// the largest first (machines, most GPUs first; nil when unknown: one
// machine). gpuportal places a job on as few machines as it can,
// whatever --nodes said (docs/slurm.md).
func gpusPerNode(j api.Job, machines []int) (nodes, perNode int) {
	gpus := j.Placement
	if len(gpus) == 0 && j.Reservation != nil {
		gpus = j.Reservation.GPUs
	}
	if len(gpus) == 0 {
		if len(machines) == 0 {
			return 1, j.GPUs
		}
		for left := j.GPUs; left > 0 && nodes < len(machines); nodes++ {
			left -= machines[nodes]
		}
		return max(nodes, 1), min(machines[0], j.GPUs)
	}
	count := map[string]int{}
	for _, g := range gpu.ParsePlacement(gpus) {
		count[g.Node]++
		perNode = max(perNode, count[g.Node])
	}
	return len(count), perNode
}

// squeueItem is one piece of a format: text, or a field with its width
// (0: none) and whether it is right-justified.
type squeueItem struct {
	text  string
	field byte
	width int
	right bool
}

// parseSqueueFormat reads squeue's --format: %[.][width]X fields and
// text between them.
func parseSqueueFormat(f string) ([]squeueItem, error) {
	var items []squeueItem
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			j := strings.IndexByte(f[i:], '%')
			if j < 0 {
				j = len(f) - i
			}
			items = append(items, squeueItem{text: f[i : i+j]})
			i += j - 1
			continue
		}
		it := squeueItem{}
		i++
		if i < len(f) && f[i] == '.' {
			it.right = true
			i++
		}
		start := i
		for i < len(f) && f[i] >= '0' && f[i] <= '9' {
			i++
		}
		if i > start {
			it.width, _ = strconv.Atoi(f[start:i])
			if it.width > 1000 {
				return nil, fmt.Errorf("--format %q: width %d: at most 1000", f, it.width)
			}
		}
		if i >= len(f) {
			return nil, fmt.Errorf("--format %q: a %% without a field at its end", f)
		}
		if f[i] == '%' {
			items = append(items, squeueItem{text: "%"})
			continue
		}
		if _, ok := squeueFields[f[i]]; !ok {
			return nil, fmt.Errorf("--format %q: %%%c is not a field gpuportal has (%s)", f, f[i], squeueFieldList())
		}
		it.field = f[i]
		items = append(items, it)
	}
	return items, nil
}

func squeueFieldList() string {
	var ks []string
	for k := range squeueFields {
		ks = append(ks, "%"+string(k))
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

// squeueMachines are the GPUs of each machine that takes jobs, most
// first, when items show a waiting job's machines (%D, %b) and one of
// jobs has neither a placement nor a reservation to tell them; else nil,
// as when the machines cannot be read (such a job is then shown on one).
func squeueMachines(ctx context.Context, cl *client.Client, items []squeueItem, jobs []api.Job) []int {
	if !slices.ContainsFunc(items, func(it squeueItem) bool { return it.field == 'D' || it.field == 'b' }) ||
		!slices.ContainsFunc(jobs, func(j api.Job) bool { return len(j.Placement) == 0 && j.Reservation == nil }) {
		return nil
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return nil
	}
	var gpus []int
	for _, n := range nodes {
		if n.State == "ready" && len(n.GPUs) > 0 {
			gpus = append(gpus, len(n.GPUs))
		}
	}
	slices.SortFunc(gpus, func(a, b int) int { return b - a })
	return gpus
}

// writeSqueue writes jobs in format items, with a header line unless
// noHeader, as squeue does: a field wider than its width is cut.
func writeSqueue(w io.Writer, items []squeueItem, jobs []api.Job, v squeueView, noHeader bool) {
	line := func(value func(it squeueItem) string) {
		var b strings.Builder
		for _, it := range items {
			if it.field == 0 {
				b.WriteString(it.text)
				continue
			}
			v := value(it)
			if it.width > 0 {
				if len(v) > it.width {
					v = v[:it.width]
				}
				pad := strings.Repeat(" ", it.width-len(v))
				if it.right {
					v = pad + v
				} else {
					v += pad
				}
			}
			b.WriteString(v)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	if !noHeader {
		line(func(it squeueItem) string { return squeueFields[it.field].header })
	}
	for _, j := range jobs {
		line(func(it squeueItem) string { return squeueFields[it.field].value(j, v) })
	}
}

// squeueCommand is "gpuportal squeue [-u USER] [--me] [-t STATES] [-o FORMAT]
// [-h]": the jobs that wait or run, as Slurm's squeue lists them.
func (c jobCmd) squeueCommand() *cobra.Command {
	f := c.flags("squeue [flags]", "list waiting and running jobs as Slurm's squeue does")
	user := f.fs.StringP("user", "u", "", "only this user's jobs")
	me := f.fs.Bool("me", false, "only your own jobs")
	states := f.fs.StringP("states", "t", "", "only these states, comma-separated, Slurm's (PD, R, PENDING, RUNNING, ...) or gpuportal's")
	format := f.fs.StringP("format", "o", squeueDefault, "fields as squeue's: %i %j %u %t %T %M %l %D %R %b %N %S %Y ... (docs/slurm.md)")
	noHeader := f.fs.BoolP("noheader", "h", false, "no header line")
	start := f.fs.Bool("start", false, "the waiting jobs only, soonest expected start first, with it (%S: the forecast's likely start) and the machines reserved for them (%Y)")
	// -h is squeue's --noheader: --help has no short form here.
	f.fs.Bool("help", false, "help for squeue")
	return f.run(func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return fmt.Errorf("squeue: unexpected argument %q", pos[0])
		}
		if *start && !f.fs.Changed("format") {
			*format = squeueStartFormat
		}
		items, err := parseSqueueFormat(*format)
		if err != nil {
			return fmt.Errorf("squeue: %w", err)
		}
		q := client.JobQuery{User: *user}
		if *me {
			if *user != "" {
				// The server's answer named its own fields ("user: scope
				// mine lists only your own jobs"), not these flags.
				return fmt.Errorf("squeue: --me and -u %s: give one", *user)
			}
			q.Scope = "mine"
		}
		want := []job.State{job.Queued, job.Preempted, job.Running}
		if *start {
			want = want[:2]
		}
		if *states != "" {
			want = nil
			for _, s := range strings.Split(*states, ",") {
				st, ok := fromSlurmState(s)
				if !ok {
					return fmt.Errorf("squeue: -t %s: unknown state %q (PD, R, CD, F, CA, TO, PR or their long names, or %s)", *states, s, jobStateNames())
				}
				if *start && !st.Waiting() {
					return fmt.Errorf("squeue: -t %s with --start: %s jobs do not wait to start (PD or PR)", *states, s)
				}
				want = append(want, st)
			}
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		var jobs []api.Job
		for _, st := range want {
			q.States = []string{string(st)}
			part, err := cl.AllJobs(ctx, q)
			if err != nil {
				return fmt.Errorf("squeue: %w", err)
			}
			jobs = append(jobs, part...)
		}
		sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].ID < jobs[b].ID })
		if *start {
			sortByStart(jobs)
		}
		writeSqueue(c.stdout, items, jobs, squeueView{now: c.now(), machines: squeueMachines(ctx, cl, items, jobs)}, *noHeader)
		return nil
	})
}

// fromSlurmState reads a state as Slurm writes it (PD, PENDING, ...) or
// as gpuportal does.
func fromSlurmState(s string) (job.State, bool) {
	up := strings.ToUpper(strings.TrimSpace(s))
	for st, names := range slurmStates {
		if up == names[0] || up == names[1] {
			return st, true
		}
	}
	st := job.State(strings.ToLower(strings.TrimSpace(s)))
	return st, st.Valid()
}
