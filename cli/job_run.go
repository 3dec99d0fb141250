package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runFlags are the flags of gpuportal job submit that say what the job
// runs with, as Slurm's sbatch names them where it has them: --env
// (repeated; sbatch's --export), --chdir, --time, --retries,
// --dependency, --array and --array-params.
type runFlags struct {
	env                envFlag
	chdir, time, dep   string
	retries            int
	array, arrayParams string
}

// envFlag is --env NAME=VALUE, repeated.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, ",") }

func (e *envFlag) Type() string { return "NAME=VALUE" }

func (e *envFlag) Set(v string) error {
	name, _, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("%q: want NAME=VALUE", v)
	}
	if err := job.CheckEnvName(name); err != nil {
		return err
	}
	*e = append(*e, v)
	return nil
}

func (r *runFlags) register(fs *pflag.FlagSet) {
	fs.Var(&r.env, "env", "set a variable of the job, NAME=VALUE (repeat for more); the job gets no other variables than these, its minimal environment and gpuportal's (GPUPORTAL_*)")
	fs.StringVar(&r.chdir, "chdir", "", "the folder the job starts in: absolute, or inside its job folder (default its job folder)")
	fs.StringVar(&r.time, "time", "", "the job's time limit over all its runs, as Slurm's --time (30, 10:00, 2:00:00, 1-00:00:00) or 2h; then SIGTERM, the grace period, SIGKILL; default the team's")
	fs.IntVar(&r.retries, "retries", 0, "start the job again up to N times when it fails on its own (non-zero exit); machine and GPU failures are always requeued")
	fs.StringVar(&r.dep, "dependency", "", "start after other jobs, as Slurm's: afterok:41, afterany:41:42, afternotok:41 (comma-separated)")
	fs.StringVar(&r.array, "array", "", "submit an array of tasks, as Slurm's --array: 0-5, 1,3,7 or 0-9:3, then %LIMIT for at most LIMIT at once; each task gets GPUPORTAL_ARRAY_INDEX")
	fs.StringVar(&r.arrayParams, "array-params", "", "a CSV file: a header naming variables, then one row per task with its values (alone: one task per row)")
}

// request puts the flags into req; errors name the flag.
func (r runFlags) request(req *api.SubmitRequest) error {
	for _, kv := range r.env {
		name, value, _ := strings.Cut(kv, "=")
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		if _, dup := req.Env[name]; dup {
			return fmt.Errorf("--env %s: given twice", name)
		}
		req.Env[name] = value
	}
	req.Workdir, req.Retries, req.Array = r.chdir, r.retries, strings.TrimSpace(r.array)
	if r.time != "" {
		if _, err := job.ParseTimeLimit(r.time); err != nil {
			return fmt.Errorf("--time %w", err)
		}
		req.TimeLimit = r.time
	}
	deps, err := job.ParseDependencies(r.dep)
	if err != nil {
		return fmt.Errorf("--dependency: %w", err)
	}
	req.Dependencies = deps
	if req.Array != "" {
		if _, err := job.ParseArray(req.Array); err != nil {
			return fmt.Errorf("--array: %w", err)
		}
	}
	if r.arrayParams != "" {
		b, err := os.ReadFile(r.arrayParams)
		if err != nil {
			return fmt.Errorf("--array-params: %w", err)
		}
		if _, err := job.ParseParams(string(b)); err != nil {
			return fmt.Errorf("--array-params %s: %w", r.arrayParams, err)
		}
		req.ArrayParams = string(b)
	}
	return nil
}

// runSubmitFlags name the flags of the run settings for the server's 400s.
var runSubmitFlags = []struct{ field, flag string }{
	{"env", "--env"}, {"workdir", "--chdir"}, {"time_limit", "--time"}, {"retries", "--retries"},
	{"dependencies", "--dependency"}, {"array_params", "--array-params"}, {"array", "--array"},
}

// printRun writes what a job runs with, for job show.
func printRun(row func(k, v string), j api.Job) {
	if j.Array != nil {
		limit := ""
		if j.Array.Limit > 0 {
			limit = fmt.Sprintf(", at most %d at once", j.Array.Limit)
		}
		row("array", fmt.Sprintf("task %d of array %d%s", j.Array.Index, j.Array.ID, limit))
	}
	if len(j.Env) > 0 {
		var env []string
		for k, v := range j.Env {
			env = append(env, k+"="+v)
		}
		slices.Sort(env)
		row("environment", oneLine(strings.Join(env, " ")))
	}
	if j.Workdir != "" {
		row("working folder", j.Workdir)
	}
	if j.TimeLimitS != nil {
		limit := job.FormatTimeLimit(secs(*j.TimeLimitS))
		if !j.State.Final() && j.TimeLeftS != nil {
			limit += fmt.Sprintf(" (%s left)", job.FormatTimeLimit(secs(*j.TimeLeftS)))
		}
		row("time limit", limit)
	}
	if j.Retries > 0 {
		row("retries", fmt.Sprintf("up to %d after a failure of its own", j.Retries))
	}
	if len(j.Dependencies) > 0 {
		deps := make([]string, len(j.Dependencies))
		for i, d := range j.Dependencies {
			deps[i] = d.String()
		}
		row("dependencies", strings.Join(deps, ","))
	}
}

// submittedLine says what a submission made: a job, or an array's
// tasks (tasks of them).
func submittedLine(j api.Job, tasks int) string {
	if j.Array != nil && tasks > 0 {
		limit := ""
		if j.Array.Limit > 0 {
			limit = fmt.Sprintf(", at most %d at once", j.Array.Limit)
		}
		return fmt.Sprintf("array %d submitted: %s, %s each for team %s (jobs %d to %d%s)",
			j.Array.ID, plural(tasks, "task"), plural(j.GPUs, "GPU"), j.Team, j.ID, j.ID+int64(tasks)-1, limit)
	}
	return fmt.Sprintf("job %d submitted: %s, %s for team %s (%s)", j.ID, j.Name, plural(j.GPUs, "GPU"), j.Team, j.State)
}

// arrayTasks counts the tasks a submission's --array and --array-params
// make; 0 when none.
func arrayTasks(req api.SubmitRequest) int {
	if req.Array != "" {
		a, err := job.ParseArray(req.Array)
		if err != nil {
			return 0
		}
		return len(a.Indices)
	}
	if req.ArrayParams != "" {
		rows, err := job.ParseParams(req.ArrayParams)
		if err != nil {
			return 0
		}
		return len(rows)
	}
	return 0
}

// resubmitCommand is job resubmit.
func (c jobCmd) resubmitCommand() *cobra.Command {
	f := c.flags("resubmit ID [flags]", "submit a job again with the same fields: a new job", jobOutputs...)
	f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr("resubmit", &err)
		return c.resubmit(ctx, f, pos)
	})
}

func (c jobCmd) resubmit(ctx context.Context, f *jobFlags, pos []string) error {
	id, err := oneJobID("resubmit", pos)
	if err != nil {
		return err
	}
	cl, err := c.client(f)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	j, err := cl.Resubmit(ctx, id, client.RawJSON(&raw))
	if err != nil {
		return err
	}
	return c.emit(f, raw, jobNames(j), func(bool) error {
		// The new job is its owner's, whoever asks (the lead resubmits a
		// researcher's job as the researcher's): say whose.
		_, err := fmt.Fprintf(c.stdout, "job %d submitted again as job %d: %s, %s for team %s, %s's (%s)\n", id, j.ID, j.Name, plural(j.GPUs, "GPU"), j.Team, j.User, j.State)
		return err
	})
}

// arrayCommand is job array: an array's tasks, or with --cancel it
// cancels them all.
func (c jobCmd) arrayCommand() *cobra.Command {
	f := c.flags("array ID [flags]", "an array's tasks by index (--cancel: cancel them all)", jobOutputs...)
	cancel := f.fs.Bool("cancel", false, "cancel every unfinished task of the array")
	f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr("array", &err)
		return c.array(ctx, f, pos, *cancel)
	})
}

func (c jobCmd) array(ctx context.Context, f *jobFlags, pos []string, cancel bool) error {
	id, err := oneJobID("array", pos)
	if err != nil {
		return err
	}
	cl, err := c.client(f)
	if err != nil {
		return err
	}
	get := cl.Array
	if cancel {
		get = cl.CancelArray
	}
	var raw json.RawMessage
	a, err := get(ctx, id, client.RawJSON(&raw))
	if err != nil {
		return err
	}
	return c.emit(f, raw, jobNames(a.Tasks...), func(bool) error { return c.printArray(a) })
}

// printArray writes an array and its tasks for people.
func (c jobCmd) printArray(a api.Array) error {
	var states []string
	for _, st := range job.States {
		if n := a.States[st]; n > 0 {
			states = append(states, fmt.Sprintf("%d %s", n, st))
		}
	}
	limit := "no limit"
	if a.Limit > 0 {
		limit = fmt.Sprintf("at most %d at once", a.Limit)
	}
	fmt.Fprintf(c.stdout, "array %d: %s (%s, team %s, %s): %s\n", a.ID, oneLine(a.Name), a.User, a.Team, limit, strings.Join(states, ", "))
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "INDEX\tJOB\tSTATE\tJCT\tEXIT\tREASON")
	for _, t := range a.Tasks {
		jct, code := "-", "-"
		if t.JCTS != nil {
			jct = fmtSeconds(*t.JCTS)
		}
		if t.ExitCode != nil {
			code = strconv.Itoa(*t.ExitCode)
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\n", t.Array.Index, t.ID, t.State, jct, code, cell(oneLine(t.Reason), 60))
	}
	return w.Flush()
}

// secs converts seconds to a duration.
func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
