package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/cmdline"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sbatch"
)

// jobHelp is what "gpuportal job --help" says besides the commands.
const jobHelp = `Submit, list, show and cancel jobs and read their output over the REST API.

Every command takes --server URL and --context NAME; every one but logs
takes -o json|yaml|wide|name (json and yaml: the REST API's objects;
wide: more columns; name: job/ID) and --json (for show: the job with its
history).

The server and the API token come from the flags, else from
$GPUPORTAL_SERVER and $GPUPORTAL_TOKEN, else from the current context of
the config file that "gpuportal login" writes (see "gpuportal config"),
else from the older token file ~/.config/gpuportal/token; the server
defaults to http://127.0.0.1:8080. A context's token is sent only to its
own server. Get a token with "gpuportal login", or with
  curl -u USER -X POST SERVER/api/v1/tokens
or on the portal's API tokens page (SERVER/tokens).

A job's command follows "--" as separate words; it is never run through a
shell: gpuportal job submit --name train --gpus 2 -- python train.py --lr 0.1

Exit codes of submit --wait and logs --follow: 0 the job succeeded, 3 it
failed, 4 it was cancelled, 5 it timed out, 130 the wait was interrupted
(the job goes on); 1 for any other error (a flag, the server's refusal).`

// Environment variables of the job commands.
const (
	jobServerEnv = "GPUPORTAL_SERVER"
	jobTokenEnv  = "GPUPORTAL_TOKEN"
)

const (
	// jobDefaultServer is the server of "gpuportal serve --dev".
	jobDefaultServer = "http://127.0.0.1:8080"
)

// newJobCmd is a client command in the process's surroundings.
func newJobCmd(stdin io.Reader, stdout, stderr io.Writer) jobCmd {
	return jobCmd{
		getenv: os.Getenv, configDir: os.UserConfigDir, now: time.Now,
		http: &http.Client{Timeout: 30 * time.Second}, stdin: stdin, stdout: stdout, stderr: stderr,
	}
}

// jobCmd is a client command of the REST API (job, login, logout,
// config, version) with what it reads from its surroundings.
type jobCmd struct {
	getenv    func(string) string
	configDir func() (string, error)
	now       func() time.Time
	http      *http.Client
	// stdin is where login reads what it asks; a terminal's input is
	// read without echo for secrets.
	stdin io.Reader
	// serve assembles the server that gpuportal serve runs; nil: no
	// serve command.
	serve Serve

	stdout, stderr io.Writer
}

// jobCommand is "gpuportal job ...".
func (c jobCmd) jobCommand() *cobra.Command {
	return group(&cobra.Command{Use: "job", Short: "submit, list, show, cancel jobs and read their logs", Long: jobHelp},
		c.submitCommand(),
		c.resubmitCommand(),
		c.arrayCommand(),
		c.listCommand("list", "list jobs"),
		// get, as kubectl's: the jobs list, or the jobs named by ID.
		c.listCommand("get", "list jobs, or get jobs by ID (--watch: and their changes)"),
		c.showCommand("show", "show a job and its history"),
		c.showCommand("describe", "show a job and its history (as show)"),
		c.cancelCommand("cancel", "cancel jobs"),
		c.logsCommand(),
		c.filesCommand(),
		c.downloadCommand(),
		c.uploadCommand(),
	)
}

// jobFlags are the flags every client command has, on its command.
type jobFlags struct {
	cmd     *cobra.Command
	fs      *pflag.FlagSet
	server  string
	context string
	// output is -o; json is the older --json, the same as -o json.
	output string
	json   bool
	// parsable is --parsable, of the commands that have it.
	parsable bool
}

// command starts a client command with none of the client's flags: use
// is its usage line ("show ID"), short what it does.
func (c jobCmd) command(use, short string) *jobFlags {
	cmd := &cobra.Command{Use: use, Short: short}
	return &jobFlags{cmd: cmd, fs: cmd.Flags()}
}

// flags starts a client command with --server and --context; outputs,
// when given, are the values of its -o (and --json, when json is one).
func (c jobCmd) flags(use, short string, outputs ...string) *jobFlags {
	f := c.command(use, short)
	f.fs.StringVar(&f.server, "server", "", "the portal's URL (default: $"+jobServerEnv+", else the current context's, else "+jobDefaultServer+")")
	c.contextFlag(f, "use this saved context (gpuportal config get-contexts) instead of the current one")
	if len(outputs) > 0 {
		f.outputFlag("output format: json or yaml (the API's objects), wide (more columns) or name (job/ID); default: a table", outputs...)
		f.fs.BoolVar(&f.json, "json", false, "the same as -o json")
	}
	return f
}

// contextFlag adds --context, completed with the saved contexts.
func (c jobCmd) contextFlag(f *jobFlags, usage string) {
	f.fs.StringVar(&f.context, "context", "", usage)
	f.complete("context", func() []string { return c.contextNamesFor() }, "context")
}

// outputFlag adds -o (--output), completed with outputs.
func (f *jobFlags) outputFlag(usage string, outputs ...string) {
	f.fs.StringVarP(&f.output, "output", "o", "", usage)
	f.complete("output", func() []string { return outputs }, "output format")
}

// complete completes the values of flag name with values(), each
// described as desc.
func (f *jobFlags) complete(name string, values func() []string, desc string) {
	_ = f.cmd.RegisterFlagCompletionFunc(name, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return described(values(), desc), cobra.ShellCompDirectiveNoFileComp
	})
}

// described are completions with one description.
func described(values []string, desc string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = cobra.CompletionWithDesc(v, desc)
	}
	return out
}

// name is the command's name in messages: "job list".
func (f *jobFlags) name() string { return commandName(f.cmd) }

// run makes run the command's action, called with the positional
// arguments once the flags are read and -o checked.
func (f *jobFlags) run(run func(ctx context.Context, args []string) error) *cobra.Command {
	f.cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if _, err := f.format(); err != nil {
			return fmt.Errorf("%s: %w", f.name(), err)
		}
		return run(cmd.Context(), args)
	}
	return f.cmd
}

// format is the output format asked for: "" (the table, or --parsable),
// json, yaml, wide or name.
func (f *jobFlags) format() (string, error) {
	switch {
	case f.parsable && (f.json || f.output != ""):
		return "", errors.New("--parsable and -o (or --json): give one")
	case f.json && f.output != "" && f.output != "json":
		return "", fmt.Errorf("--json and -o %s: give one", f.output)
	case f.json:
		return "json", nil
	}
	switch f.output {
	case "", "json", "yaml", "wide", "name":
		return f.output, nil
	}
	return "", fmt.Errorf("-o %q: want json, yaml, wide or name", f.output)
}

// client connects to the server the flags, the environment and the
// config file name, with the user's token for it (see target).
func (c jobCmd) client(f *jobFlags) (*client.Client, error) {
	t, err := c.target(f)
	if err != nil {
		return nil, err
	}
	return c.newClient(t.server, t.token)
}

// newClient is a client of server with token, warning when the token
// would cross the network unencrypted.
func (c jobCmd) newClient(base *url.URL, token string) (*client.Client, error) {
	if token != "" && base.Scheme == "http" && !isLoopbackHost(base.Hostname()) {
		fmt.Fprintf(c.stderr, "gpuportal: warning: your API token goes to %s unencrypted; use an https:// server URL\n", base.Host)
	}
	cl, err := client.New(base.String(), token, client.WithHTTPClient(c.http), client.WithUserAgent("gpuportal-cli"))
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	return cl, nil
}

// target is the server a command talks to and the token it presents.
type target struct {
	server *url.URL
	token  string
}

// target resolves the server and the token, flags first, then the
// environment, then the config file:
//
//   - server: --server; else the server of --context; else
//     $GPUPORTAL_SERVER; else the current context's; else the default;
//   - token: the token of --context; else $GPUPORTAL_TOKEN; else the
//     token of the current context; else the older token file.
//
// A context's token goes only to that context's server.
func (c jobCmd) target(f *jobFlags) (target, error) {
	base, cx, err := c.server(f)
	if err != nil {
		return target{}, err
	}
	ownServer := cx != nil && sameServer(cx.Server, base.String())
	switch envToken := strings.TrimSpace(c.getenv(jobTokenEnv)); {
	case f.context != "" && ownServer:
		if cx.Token == "" {
			return target{}, fmt.Errorf("context %q is logged out: run gpuportal login --context %s", cx.Name, cx.Name)
		}
		return target{base, cx.Token}, nil
	case envToken != "":
		return target{base, envToken}, nil
	case ownServer && cx.Token != "":
		return target{base, cx.Token}, nil
	}
	token, err := c.token(base, cx)
	if err != nil {
		return target{}, err
	}
	return target{base, token}, nil
}

// server resolves the server (see target) and returns it with the
// context that names it or that was considered: --context's, else the
// current one, when the config file was read.
func (c jobCmd) server(f *jobFlags) (*url.URL, *cliContext, error) {
	var cfg *cliConfig
	load := func() error {
		if cfg != nil {
			return nil
		}
		var err error
		cfg, _, err = c.loadConfig()
		return err
	}
	var cx *cliContext
	if f.context != "" {
		if err := load(); err != nil {
			return nil, nil, err
		}
		if cx = cfg.context(f.context); cx == nil {
			return nil, nil, fmt.Errorf("--context: %w", unknownContext(f.context, cfg))
		}
	}
	server := f.server
	if server == "" && cx != nil {
		server = cx.Server
	}
	if server == "" {
		server = c.getenv(jobServerEnv)
	}
	if cx == nil && (server == "" || strings.TrimSpace(c.getenv(jobTokenEnv)) == "") {
		if err := load(); err != nil {
			return nil, nil, err
		}
		cx = cfg.current()
		if server == "" && cx != nil {
			server = cx.Server
		}
	}
	if server == "" {
		server = jobDefaultServer
	}
	base, err := parseJobServer(server)
	if err != nil {
		return nil, nil, err
	}
	return base, cx, nil
}

// parseJobServer checks a --server URL.
func parseJobServer(s string) (*url.URL, error) {
	u, err := client.ParseServer(s)
	if err != nil {
		return nil, fmt.Errorf("--server %q: want the portal's URL, such as https://gpus.example.com", s)
	}
	return u, nil
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tokenPath is where the job commands look for the API token when
// $GPUPORTAL_TOKEN is not set.
func (c jobCmd) tokenPath() (string, error) {
	dir, err := c.configDir()
	if err != nil {
		return "", fmt.Errorf("find the token file: %w", err)
	}
	return filepath.Join(dir, "gpuportal", "token"), nil
}

// token reads the older token file, which only its owner may read:
// the token when neither a context nor $GPUPORTAL_TOKEN gives one. cx is
// the context that was considered, if any, for the error message.
func (c jobCmd) token(server *url.URL, cx *cliContext) (string, error) {
	login := "run gpuportal login --server " + server.String()
	if cx != nil && sameServer(cx.Server, server.String()) {
		login = "run gpuportal login --context " + cx.Name
	}
	path, err := c.tokenPath()
	if err != nil {
		return "", fmt.Errorf("no API token: %s or set $%s (%w)", login, jobTokenEnv, err)
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no API token for %s: %s, set $%s, or save the token in %s (chmod 600). %s",
			server, login, jobTokenEnv, path, howToGetToken(server))
	}
	if err != nil {
		return "", fmt.Errorf("read the token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token file %s may be read by other users (mode %04o): run chmod 600 %s", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("token file %s is empty. %s", path, howToGetToken(server))
	}
	return t, nil
}

// howToGetToken tells a user how to get an API token from server.
func howToGetToken(server *url.URL) string {
	s := server.String()
	return fmt.Sprintf("Get a token with `curl -u YOUR_USER -X POST %s/api/v1/tokens` (it prints {\"token\": ...}) "+
		"or on the portal's API tokens page, %s/tokens", s, s)
}

// hintError is an error with what to do about it.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + ". " + e.hint }
func (e *hintError) Unwrap() error { return e.err }

// withHint adds hint to err, unless err has one.
func withHint(err error, hint string) error {
	if err == nil || hintOf(err) != "" {
		return err
	}
	return &hintError{err, hint}
}

// hintOf is the hint err carries, or "".
func hintOf(err error) string {
	var he *hintError
	if errors.As(err, &he) {
		return he.hint
	}
	return ""
}

// explain adds to the server's refusal what to do: how to get a token
// for a 401.
func explain(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status == http.StatusUnauthorized {
		if u, perr := url.Parse(ce.Server); perr == nil {
			return withHint(err, howToGetToken(u))
		}
	}
	return err
}

// printJSON writes a JSON answer indented.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// parseJobID reads a job ID argument.
func parseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("job ID %q: must be a positive number", s)
	}
	return id, nil
}

// oneJobID reads the single job ID a command takes.
func oneJobID(cmd string, pos []string) (int64, error) {
	if len(pos) != 1 {
		return 0, fmt.Errorf("job %s: want one job ID, got %d arguments", cmd, len(pos))
	}
	return parseJobID(pos[0])
}

// submitCommand is job submit.
func (c jobCmd) submitCommand() *cobra.Command {
	f := c.flags("submit --name NAME [flags] (--sim-duration 10m | -- PROGRAM [ARG...] | SCRIPT [ARG...])", "submit a job", jobOutputs...)
	var sf submitFlags
	sf.register(f)
	var req api.SubmitRequest
	var simDuration string
	f.fs.StringVar(&req.Name, "name", "", "the job's name (required)")
	f.fs.StringVar(&req.Team, "team", "", "the team the job runs for (default: yours)")
	f.fs.IntVar(&req.GPUs, "gpus", 1, "GPUs the job needs")
	f.fs.StringVar(&simDuration, "sim-duration", "", "run a simulated training job this long (90s, 10m, or seconds) instead of a command")
	f.fs.Float64Var(&req.GPUMemGB, "gpu-mem-gb", 0, "GPU memory the job needs on each GPU, in GB (0: unknown)")
	f.fs.StringVar(&req.Model, "model", "", "the job's model, for placement (see the submit page for the list)")
	f.fs.StringVar(&req.Image, "image", "", "run the command in this container image (registry.lab/team/pytorch:2.3), as you, with only the job's GPUs (docs/agents.md)")
	f.fs.StringVar(&req.Priority, "priority", "", "the job's priority within its team: high, normal or low (your team says which you may use; sbatch's --qos)")
	f.fs.BoolVar(&req.TasksPerGPU, "tasks-per-gpu", false, "start the command once per GPU, each with its RANK and LOCAL_RANK, rather than once per machine (docs/multinode.md)")
	f.fs.BoolVar(&req.Sharing, "share", false, "opt in to Salus sharing: the job may share its one GPU, an iteration at a time (docs/salus.md)")
	f.fs.Float64Var(&req.GPUFraction, "gpu-fraction", 0, "ask for this fraction of one GPU (0 < f < 1): implies --share")
	f.fs.Int64Var(&req.MemPersistentMiB, "mem-persistent-mib", 0, "with --share: persistent GPU memory (weights, optimizer state), MiB")
	f.fs.Int64Var(&req.MemEphemeralMiB, "mem-ephemeral-mib", 0, "with --share: ephemeral GPU memory per iteration (activations), MiB")
	f.fs.IntVar(&req.BatchSize, "batch-size", 0, "with --share and --model or --parameters: the batch size, for the memory estimate")
	f.fs.Int64Var(&req.Parameters, "parameters", 0, "with --share: the model's parameter count, for the memory estimate")
	var prof profileFlags
	prof.register(f.fs)
	var run runFlags
	run.register(f.fs)
	// The job's command, after "--", may be completed as files.
	f.cmd.ValidArgsFunction = cobra.FixedCompletions(nil, cobra.ShellCompDirectiveDefault)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr("submit", &err)
		// The job's command is everything after "--", untouched by flag parsing.
		var argv []string
		if dash := f.cmd.ArgsLenAtDash(); dash >= 0 {
			pos, argv = pos[:dash], pos[dash:]
		}
		req := req // the flags' values, for this run
		if req.CPUProfile, err = prof.request(); err != nil {
			return err
		}
		if err := run.request(&req); err != nil {
			return err
		}
		if len(pos) > 0 && len(argv) == 0 && simDuration == "" && req.Image == "" {
			// A batch script, as sbatch takes it: its arguments follow it.
			if fi, err := os.Stat(pos[0]); err == nil && fi.Mode().IsRegular() {
				return c.submitScript(ctx, f, sf, req, visited(f), sbatch.Options{}, nil, pos[0], pos[1:])
			}
		}
		if len(pos) > 0 {
			return fmt.Errorf("unexpected argument %q: put the job's command after --, as in: -- python train.py, or give a batch script (docs/slurm.md)", pos[0])
		}
		switch {
		case req.Image != "" && len(argv) == 0:
			return errors.New("--image needs the command to run in it after --, as in: --image localhost/train:1 -- python train.py")
		case len(argv) > 0 && simDuration != "":
			return errors.New("give either a command after -- or --sim-duration, not both")
		case len(argv) > 0:
			req.Command = api.Command(argv)
		case simDuration != "":
			d, err := parseSimDuration(simDuration)
			if err != nil {
				return err
			}
			req.Sim = &api.SimSpec{DurationS: d}
		default:
			return errors.New("give the job's command after -- (as in: gpuportal job submit --name train --gpus 2 -- python train.py) or --sim-duration for a simulated job")
		}
		return c.send(ctx, f, sf, req)
	})
}

// parseSimDuration reads --sim-duration: a Go duration or seconds.
func parseSimDuration(s string) (float64, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d.Seconds(), nil
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v, nil
	}
	return 0, fmt.Errorf("--sim-duration %q: want a duration such as 90s or 10m, or a number of seconds", s)
}

// jobOutputs are the values of the job commands' -o.
var jobOutputs = []string{"json", "yaml", "wide", "name"}

// listCommand is job list, or as name get, which also gets jobs by ID.
func (c jobCmd) listCommand(name, short string) *cobra.Command {
	use := name + " [flags]"
	if name == "get" {
		use = name + " [ID...] [flags]"
	}
	f := c.flags(use, short, jobOutputs...)
	var lq listQuery
	f.fs.StringVar(&lq.scope, "scope", "", "mine, team or all (admins); default: your team's (all jobs for admins)")
	f.fs.StringVar(&lq.state, "state", "", "only jobs in these states, comma-separated: "+jobStateNames())
	f.fs.StringVar(&lq.user, "user", "", "only this user's jobs")
	f.fs.StringVar(&lq.team, "team", "", "only this team's jobs (admins: any team; others: their own)")
	f.fs.IntVar(&lq.limit, "limit", 0, "at most this many jobs, newest first (1 to 1000; 0: the server's default, 1000); with --all, per request")
	f.fs.BoolVar(&lq.all, "all", false, "every matching job: follow the server's cursor page after page")
	f.fs.BoolVar(&lq.start, "start", false, "only waiting jobs (queued and preempted), with when each is forecast to start, soonest first")
	f.fs.StringVar(&lq.format, "format", "", "write the jobs as Slurm's squeue --format does: %i %j %u %t %T %M %l %D %R %b %N ... (docs/slurm.md)")
	var lf listFlags
	lf.register(f)
	var wf watchFlags
	wf.register(f)
	f.complete("state", func() []string { return jobStateList() }, "job state")
	f.complete("scope", func() []string { return []string{"mine", "team", "all"} }, "whose jobs")
	if name == "get" {
		f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	}
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr(name, &err)
		return c.list(ctx, f, name, pos, lq, lf, wf)
	})
}

// listQuery are the flags of job list that choose the jobs.
type listQuery struct {
	scope, state, user, team string
	limit                    int
	all, start               bool
	format                   string
}

func (c jobCmd) list(ctx context.Context, f *jobFlags, name string, pos []string, lq listQuery, lf listFlags, wf watchFlags) (err error) {
	if len(pos) > 0 && name != "get" {
		return fmt.Errorf("unexpected argument %q (gpuportal job get ID... gets jobs by ID)", pos[0])
	}
	if err := wf.check(f, lq.format, lq.start); err != nil {
		return err
	}
	ids := make([]int64, len(pos))
	for i, p := range pos {
		if ids[i], err = parseJobID(p); err != nil {
			return err
		}
	}
	if lq.limit < 0 || lq.limit > 1000 {
		return fmt.Errorf("--limit %d: must be from 1 to 1000 (0: the server's default)", lq.limit)
	}
	for _, st := range strings.Split(lq.state, ",") {
		if st != "" && !job.State(st).Valid() {
			return fmt.Errorf("--state %s: unknown state %q (want %s)", lq.state, st, jobStateNames())
		}
	}
	if lq.start && lq.state != "" && !job.State(lq.state).Waiting() {
		return fmt.Errorf("--start lists waiting jobs: --state %s names none", lq.state)
	}
	q := client.JobQuery{Scope: lq.scope, User: lq.user, Team: lq.team, Limit: lq.limit}
	if lq.state != "" {
		q.States = strings.Split(lq.state, ",")
	}
	cl, err := c.client(f)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		set := visited(f)
		for _, fl := range []string{"scope", "state", "user", "team", "limit", "all", "start", "format"} {
			if set[fl] {
				return fmt.Errorf("--%s: jobs named by ID take no filter; leave out --%s or the IDs", fl, fl)
			}
		}
		return c.getJobs(ctx, cl, ids, f, lf, wf)
	}
	if lq.start {
		return c.listStart(ctx, cl, q, lq.state, f, lf)
	}
	jobs, raw, err := listJobs(ctx, cl, q, lq.all)
	if err != nil {
		return err
	}
	if wf.watch {
		if err := c.writeJobs(jobs, raw, f, lf, jobListColumns, "no jobs"); err != nil {
			return err
		}
		return c.watchJobs(ctx, f, lf, wf, jobs, func(ctx context.Context) ([]api.Job, error) {
			jobs, _, err := listJobs(ctx, cl, q, lq.all)
			return jobs, err
		}, false)
	}
	if lq.format != "" {
		items, err := parseSqueueFormat(lq.format)
		if err != nil {
			return err
		}
		writeSqueue(c.stdout, items, jobs, squeueView{now: c.now(), machines: squeueMachines(ctx, cl, items, jobs)}, lf.noHeaders)
		return nil
	}
	return c.writeJobs(jobs, raw, f, lf, jobListColumns, "no jobs")
}

// listJobs gets the jobs list of q: one page, or with all every page,
// following the server's cursor. raw is the jobs as one JSON list: the
// server's own for one page.
func listJobs(ctx context.Context, cl *client.Client, q client.JobQuery, all bool) ([]api.Job, []byte, error) {
	if !all {
		var raw json.RawMessage
		p, err := cl.Jobs(ctx, q, client.RawJSON(&raw))
		return p.Jobs, raw, err
	}
	jobs, err := cl.AllJobs(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	raw, err := json.Marshal(jobs)
	if err != nil {
		return nil, nil, fmt.Errorf("encode jobs: %w", err)
	}
	return jobs, raw, nil
}

// listStart prints the waiting jobs of q (of state, when set) with their
// start forecasts, soonest first: "list --start".
func (c jobCmd) listStart(ctx context.Context, cl *client.Client, q client.JobQuery, state string, f *jobFlags, lf listFlags) error {
	states := []job.State{job.Queued, job.Preempted}
	if state != "" {
		states = []job.State{job.State(state)}
	}
	var jobs []api.Job
	for _, st := range states {
		q.States = []string{string(st)}
		p, err := cl.Jobs(ctx, q)
		if err != nil {
			return err
		}
		jobs = append(jobs, p.Jobs...)
	}
	sortByStart(jobs)
	raw, err := json.Marshal(jobs)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return c.writeJobs(jobs, raw, f, lf, jobStartColumns, "no waiting jobs")
}

// sortByStart orders waiting jobs by the start each is expected at
// (api.Forecast.Expected: the likely start, else the earliest), soonest
// first, then those expected to start at no time, each by ID among
// equals: "job list --start" and "squeue --start".
func sortByStart(jobs []api.Job) {
	sort.SliceStable(jobs, func(a, b int) bool {
		ka, kb := startKey(jobs[a]), startKey(jobs[b])
		if ka != kb {
			return ka < kb
		}
		return jobs[a].ID < jobs[b].ID
	})
}

// startKey is the expected start of a waiting job, to order by; the
// largest key for a job expected at no time.
func startKey(j api.Job) int64 {
	if t := j.Forecast.Expected(); t != nil {
		return t.UnixNano()
	}
	return math.MaxInt64
}

func jobStateNames() string {
	return strings.Join(jobStateList(), ", ")
}

// jobStateList is every job state's name.
func jobStateList() []string {
	names := make([]string, len(job.States))
	for i, s := range job.States {
		names[i] = string(s)
	}
	return names
}

// showCommand is job show, or as name describe.
func (c jobCmd) showCommand(name, short string) *cobra.Command {
	f := c.flags(name+" ID [flags]", short, jobOutputs...)
	f.fs.Lookup("json").Usage = "print the job and its history in one JSON object (-o json: the job as the API returns it)"
	f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr(name, &err)
		return c.show(ctx, f, name, pos)
	})
}

func (c jobCmd) show(ctx context.Context, f *jobFlags, name string, pos []string) error {
	id, err := oneJobID(name, pos)
	if err != nil {
		return err
	}
	cl, err := c.client(f)
	if err != nil {
		return err
	}
	var rawJob, rawHistory json.RawMessage
	j, err := cl.Job(ctx, id, client.RawJSON(&rawJob))
	if err != nil {
		return err
	}
	history, err := cl.History(ctx, id, client.RawJSON(&rawHistory))
	if err != nil {
		return err
	}
	if f.json {
		// --json, older than -o, prints the job with its history.
		b, err := json.Marshal(map[string]json.RawMessage{"job": rawJob, "history": rawHistory})
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		return printJSON(c.stdout, b)
	}
	return c.emit(f, rawJob, jobNames(j), func(bool) error {
		c.printJob(j, history)
		return nil
	})
}

// printJob writes a job and its history for a person.
func (c jobCmd) printJob(j api.Job, history []api.Event) {
	fmt.Fprintf(c.stdout, "job %d: %s\n", j.ID, oneLine(j.Name))
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(w, "  %s:\t%s\n", k, v) }
	state := string(j.State)
	if j.Borrowed {
		state += " (borrowed: beyond its team's guarantee, it may be reclaimed)"
	}
	row("state", state)
	if at := j.ReclaimableAt; at != nil {
		if now := c.now(); at.After(now) {
			row("reclaimable", fmt.Sprintf("from %s (in %s)", at.Local().Format(time.DateTime), fmtSeconds(at.Sub(now).Seconds())))
		} else {
			row("reclaimable", "now, by a team under its guarantee whose job needs the GPUs")
		}
	}
	if j.Reason != "" {
		row("reason", oneLine(j.Reason))
	}
	row("user", fmt.Sprintf("%s (team %s)", j.User, j.Team))
	printWorkload(row, j)
	c.printProgress(row, j)
	printRun(row, j)
	if t := j.Idle.Text(c.now(), time.Local); t != "" {
		row("idle", t)
	}
	if u := j.Usage; u != nil && len(u.GPUs) > 0 {
		row("utilization", fmt.Sprintf("%s mean over the run (%s)", pct(u.UtilAvgPct), fmtSeconds(u.To.Sub(u.From).Seconds())))
		for _, g := range u.GPUs {
			row(fmt.Sprintf("GPU %s:%d", g.Node, g.Index), gpuUsageLine(g))
		}
	}
	_ = w.Flush()
	if len(history) == 0 {
		return
	}
	fmt.Fprintln(c.stdout, "\nhistory:")
	w = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	for _, e := range history {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", e.At.Local().Format(time.DateTime), e.State, oneLine(e.Detail))
	}
	_ = w.Flush()
}

// printWorkload writes, for printJob, what j runs and on which GPUs.
func printWorkload(row func(k, v string), j api.Job) {
	gpus := plural(j.GPUs, "GPU")
	if len(j.Placement) > 0 {
		gpus += " on " + strings.Join(j.Placement, ", ")
	}
	if j.State == job.Running && j.HeldGPUs > 0 && j.HeldGPUs < float64(j.GPUs) {
		gpus += fmt.Sprintf(" (shared: holds %s)", strconv.FormatFloat(math.Round(j.HeldGPUs*100)/100, 'f', -1, 64))
	}
	row("GPUs", gpus)
	switch {
	case len(j.Command) > 0:
		row("command", cmdline.Join(j.Command))
		if j.Image != "" {
			row("image", j.Image)
		}
		if j.TasksPerGPU {
			row("processes", "one per GPU (RANK, LOCAL_RANK)")
		}
	case j.Sim != nil:
		row("workload", "simulated training, "+fmtSeconds(j.Sim.DurationS))
	}
	if j.Priority != "" && j.Priority != job.PriorityNormal {
		row("priority", j.Priority)
	}
	if j.Model != "" {
		row("model", j.Model)
	}
	if j.GPUMemGB > 0 {
		row("GPU memory", strconv.FormatFloat(j.GPUMemGB, 'f', -1, 64)+" GB per GPU")
	}
	if j.Sharing {
		row("sharing", sharingLine(j))
	}
	if j.CPUProfile != nil {
		row("CPU profile", profileLine(j.CPUProfile))
	}
	if l := j.Lane; l != nil {
		row("lane", laneLine(l))
	}
}

// printProgress writes, for printJob, where j is: its queue and
// forecast, its times, what it attained, its failures and retries.
func (c jobCmd) printProgress(row func(k, v string), j api.Job) {
	if !j.State.Final() {
		row("queue", strconv.Itoa(j.Queue))
	}
	if f := j.Forecast; f != nil {
		row("expected start", f.Text(c.now(), time.Local))
		if f.MadeAt != nil {
			row("forecast made", c.when(*f.MadeAt))
		}
	}
	row("submitted", c.when(j.SubmittedAt))
	if j.StartedAt != nil {
		row("started", c.when(*j.StartedAt))
	}
	if j.FinishedAt != nil {
		row("finished", c.when(*j.FinishedAt))
	}
	if j.JCTS != nil {
		row("JCT", fmtSeconds(*j.JCTS))
	}
	if j.ExitCode != nil {
		row("exit code", strconv.Itoa(*j.ExitCode))
	}
	row("executed", fmtSeconds(j.ExecutedS))
	row("attained service", fmt.Sprintf("%.0f GPU-seconds", j.AttainedService))
	if j.Preemptions > 0 {
		row("preemptions", strconv.Itoa(j.Preemptions))
	}
	if j.Failures > 0 {
		row("failures", strconv.Itoa(j.Failures))
	}
	if j.RetryAt != nil {
		row("next retry", c.when(*j.RetryAt))
	}
	if j.Held {
		row("held", "yes: never scheduled; cancel it and submit it again (see its reason)")
	}
}

// cancelCommand is job cancel, and as name, the commands that cancel
// jobs as others do (scancel, session stop).
func (c jobCmd) cancelCommand(name, short string) *cobra.Command {
	f := c.flags(name+" ID... [flags]", short, jobOutputs...)
	f.cmd.ValidArgsFunction = c.jobIDs(f, true)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr("cancel", &err)
		if name == "scancel" {
			return c.scancel(ctx, f, pos)
		}
		return c.cancel(ctx, f, pos)
	})
}

// scancel cancels jobs as Slurm's scancel names them: an array's ID
// cancels every task of it (job array ID --cancel), ARRAY_INDEX one task
// (squeue's %i), another ID its job. It cancelled the array's first task
// alone, which job cancel does.
func (c jobCmd) scancel(ctx context.Context, f *jobFlags, pos []string) error {
	if len(pos) == 0 {
		return errors.New("want the IDs of the jobs to cancel")
	}
	cl, err := c.client(f)
	if err != nil {
		return err
	}
	var jobs []string
	var errs []error
	for _, p := range pos {
		arrayPart, index, isTask := strings.Cut(p, "_")
		id, err := parseJobID(arrayPart)
		if err != nil {
			return err
		}
		if isTask {
			i, err := strconv.Atoi(index)
			if err != nil || i < 0 {
				return fmt.Errorf("%s: want ARRAY_INDEX, an array's ID and a task's index (ranges such as 4_[1-3] are not read)", p)
			}
			a, err := cl.Array(ctx, id)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
				continue
			}
			task := slices.IndexFunc(a.Tasks, func(t api.Job) bool { return t.Array != nil && t.Array.Index == i })
			if task < 0 {
				errs = append(errs, fmt.Errorf("%s: array %d has no task %d", p, id, i))
				continue
			}
			jobs = append(jobs, strconv.FormatInt(a.Tasks[task].ID, 10))
			continue
		}
		j, err := cl.Job(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("job %d: %w", id, err))
			continue
		}
		if j.Array == nil || j.Array.ID != id {
			jobs = append(jobs, arrayPart)
			continue
		}
		var raw json.RawMessage
		a, err := cl.CancelArray(ctx, id, client.RawJSON(&raw))
		if err != nil {
			errs = append(errs, fmt.Errorf("array %d: %w", id, err))
			continue
		}
		err = c.emit(f, raw, jobNames(a.Tasks...), func(bool) error { return c.printArray(a) })
		if err != nil {
			errs = append(errs, fmt.Errorf("array %d: %w", id, err))
		}
	}
	if len(jobs) > 0 {
		errs = append(errs, c.cancel(ctx, f, jobs))
	}
	return errors.Join(errs...)
}

func (c jobCmd) cancel(ctx context.Context, f *jobFlags, pos []string) (err error) {
	if len(pos) == 0 {
		return errors.New("want the IDs of the jobs to cancel")
	}
	ids := make([]int64, len(pos))
	for i, p := range pos {
		if ids[i], err = parseJobID(p); err != nil {
			return err
		}
	}
	cl, err := c.client(f)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		var raw json.RawMessage
		j, err := cl.Cancel(ctx, id, client.RawJSON(&raw))
		if err != nil {
			if len(ids) > 1 {
				// Say which job; the server's message does too, mostly.
				err = fmt.Errorf("job %d: %w", id, err)
			}
			errs = append(errs, err)
			continue
		}
		err = c.emit(f, raw, jobNames(j), func(bool) error {
			if j.State.Final() {
				_, err := fmt.Fprintf(c.stdout, "job %d %s\n", id, j.State)
				return err
			}
			_, err := fmt.Fprintf(c.stdout, "job %d: cancel requested; it is %s and stopping\n", id, j.State)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("job %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// logsCommand is job logs: a job's output, with --follow as it comes.
func (c jobCmd) logsCommand() *cobra.Command {
	f := c.flags("logs ID [flags]", "print a job's output")
	f.cmd.Aliases = []string{"output"} // docs/slurm.md's name for it, beside Slurm's slurm-%j.out
	tail := f.fs.Int("tail-bytes", 64<<10, fmt.Sprintf("show at most the last N bytes of output (1 to %d)", client.MaxLogTail))
	follow := f.fs.BoolP("follow", "f", false, "keep showing new output until the job ends")
	interval := f.fs.Duration("interval", time.Second, "with --follow: how often to ask the server for new output")
	node := f.fs.String("node", "", "the output on this machine, for a job on several (default: the first, its rank 0)")
	f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr("logs", &err)
		return c.logs(ctx, f, pos, *tail, *follow, *interval, *node)
	})
}

func (c jobCmd) logs(ctx context.Context, f *jobFlags, pos []string, tail int, follow bool, interval time.Duration, node string) error {
	id, err := oneJobID("logs", pos)
	if err != nil {
		return err
	}
	if tail < 1 || tail > client.MaxLogTail {
		return fmt.Errorf("--tail-bytes %d: must be from 1 to %d", tail, client.MaxLogTail)
	}
	if interval <= 0 {
		return fmt.Errorf("--interval %s: must be positive", interval)
	}
	cl, err := c.client(f)
	if err != nil {
		return err
	}
	if !follow {
		out, err := cl.LogTailOn(ctx, id, node, tail)
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(out)
		return err
	}
	return c.followLogs(ctx, cl, id, tail, interval, node)
}

// followLogs shows the last tail bytes of a job's output, then new output
// as it comes, until the job ends (its exit status says how) or ctx is
// done.
func (c jobCmd) followLogs(ctx context.Context, cl *client.Client, id int64, tail int, interval time.Duration, node string) error {
	j, err := cl.FollowLogs(ctx, id, c.stdout, client.Follow{
		Tail: int64(tail), Interval: interval, Node: node,
		Restarted: func() { fmt.Fprintf(c.stderr, "gpuportal: job %d runs again; its output starts anew\n", id) },
	})
	if ctx.Err() != nil {
		return c.interrupted(id)
	}
	if err != nil {
		return err
	}
	return c.jobEnded(j)
}

// wrapJobErr prefixes an error of a job command with the command's name.
func wrapJobErr(cmd string, err *error) {
	wrapCmdErr("job "+cmd, err)
}

// ago says how long before now t was ("5m ago"), or how long after now
// it will be ("in 5m"), for tables.
func (c jobCmd) ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := c.now().Sub(t)
	format := "%s ago"
	if d < 0 {
		d, format = -d, "in %s"
	}
	var n string
	switch {
	case d < time.Minute:
		n = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		n = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		n = fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return t.Local().Format(time.DateOnly)
	}
	return fmt.Sprintf(format, n)
}

// when writes a time in local time with how long ago it was.
func (c jobCmd) when(t time.Time) string {
	return fmt.Sprintf("%s (%s)", t.Local().Format(time.DateTime), c.ago(t))
}

func fmtSeconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// oneLine keeps a server's text on one line of a table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cell shortens s to at most n characters for a table.
func cell(s string, n int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// gpuUsageLine says how a job uses one of its GPUs: what its page shows.
func gpuUsageLine(g api.GPUUsage) string {
	gb := func(v int64) string { return fmt.Sprintf("%.1f GB", float64(v)/1024) }
	line := "utilization " + pct(g.UtilPct) + " now, " + pct(g.UtilAvgPct) + " over the run"
	switch {
	case g.JobMemMiB != nil:
		line += "; memory " + gb(*g.JobMemMiB) + " (its own) of " + gb(g.MemMiB)
	case g.UtilPct != nil:
		line += "; memory " + gb(g.MemUsedMiB) + " used on the GPU of " + gb(g.MemMiB)
	}
	if g.JobMemMaxMiB != nil {
		line += ", peak " + gb(*g.JobMemMaxMiB)
	}
	if g.Shared {
		line += "; shared"
		if len(g.SharedWith) > 0 {
			ids := make([]string, len(g.SharedWith))
			for i, id := range g.SharedWith {
				ids[i] = strconv.FormatInt(id, 10)
			}
			line += " with job " + strings.Join(ids, ", ")
		}
		line += " (utilization is the whole GPU's)"
	}
	return line
}

// pct writes a percentage as the pages do: "87%", "—" when unknown.
func pct(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", *v)
}
