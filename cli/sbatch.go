package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/cli/srun"
	"github.com/gpuportal/gpuportal/core/sbatch"
	"github.com/spf13/cobra"
)

// Slurm batch scripts (docs/slurm.md, "Scripts"): "gpuportal job submit
// script.sh" and "gpuportal sbatch [OPTIONS] script.sh" read the script's
// #SBATCH directives (and sbatch's options) into a submission and run the
// script, unchanged, on the job's machines.

// sbatchCommand is "gpuportal sbatch [SBATCH OPTIONS] SCRIPT [ARGS...]", as
// Slurm's: it prints "Submitted batch job ID" (--parsable: the ID).
func (c jobCmd) sbatchCommand() *cobra.Command {
	f := c.flags("sbatch [OPTIONS] SCRIPT [ARG...]", "submit a Slurm batch script, its #SBATCH directives read (docs/slurm.md)")
	// sbatch's options are Slurm's, read by sbatch.ParseArgs.
	f.cmd.DisableFlagParsing = true
	f.cmd.RunE = func(cmd *cobra.Command, args []string) error { return c.sbatch(cmd.Context(), f, args) }
	return f.cmd
}

func (c jobCmd) sbatch(ctx context.Context, f *jobFlags, args []string) (err error) {
	// Every error says it is sbatch's, the server's refusals too (they
	// read "gpuportal: time_limit: ...", naming no command).
	defer wrapCmdErr("sbatch", &err)
	var sf submitFlags
	sf.sbatch = true
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--parsable":
			f.parsable = true
		case a == "--wait" || a == "-W":
			sf.wait = true
		case a == "--server" || a == "--context":
			if i+1 >= len(args) {
				return fmt.Errorf("%s needs a value", a)
			}
			if err := f.fs.Set(a[2:], args[i+1]); err != nil {
				return err
			}
			i++
		case strings.HasPrefix(a, "--server=") || strings.HasPrefix(a, "--context="):
			name, v, _ := strings.Cut(a[2:], "=")
			if err := f.fs.Set(name, v); err != nil {
				return err
			}
		default:
			rest = append(rest, a)
			if !strings.HasPrefix(a, "-") {
				rest = append(rest, args[i+1:]...) // the script and its arguments
				i = len(args)
			}
		}
	}
	over, ignored, script, scriptArgs, err := sbatch.ParseArgs(rest)
	if err != nil {
		return err
	}
	req := api.SubmitRequest{GPUs: 0}
	return c.submitScript(ctx, f, sf, req, map[string]bool{}, over, ignored, script, scriptArgs)
}

// submitScript submits batch script path with args: req holds what the
// command line set (its flags in set), which comes before the script's
// directives; over and overIgnored are sbatch's command-line options,
// which come before them too.
func (c jobCmd) submitScript(ctx context.Context, f *jobFlags, sf submitFlags, req api.SubmitRequest, set map[string]bool,
	over sbatch.Options, overIgnored []sbatch.Ignored, path string, args []string) error {
	s, err := readScript(path)
	if err != nil {
		return err
	}
	o := s.Options.Merge(over)
	note := func(format string, a ...any) {
		fmt.Fprintf(c.stderr, "gpuportal: %s: "+format+"\n", append([]any{filepath.Base(path)}, a...)...)
	}
	for _, ig := range append(s.Ignored, overIgnored...) {
		note("ignored %s", ig)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("batch script: the submit folder: %w", err)
	}

	sbatchResources(&req, o, set, path, note)
	sbatchEnv(&req, o, set, cwd, note)
	host, _ := os.Hostname()
	req.Env["SLURM_SUBMIT_DIR"], req.Env["SLURM_SUBMIT_HOST"] = cwd, host
	if o.Output != "" || o.Error != "" {
		note("output goes to the files --output and --error name on the job's machine, relative to its working folder, not to the job's output in the portal (gpuportal job logs)")
	}
	text := sbatch.OutputRedirect(o.Output, o.Error) + s.Text
	req.Command = append(append(append(api.Command{}, s.Interpreter...), "-c", text, path), args...)

	return c.send(ctx, f, sf, req)
}

// readScript reads and parses the batch script at path, which a shell
// runs.
func readScript(path string) (sbatch.Script, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return sbatch.Script{}, fmt.Errorf("batch script: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxScriptBytes {
		return sbatch.Script{}, fmt.Errorf("batch script %s: want a file of at most %d bytes (larger: give the command after --)", path, maxScriptBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return sbatch.Script{}, fmt.Errorf("batch script: %w", err)
	}
	s, err := sbatch.Parse(string(b))
	if err != nil {
		return sbatch.Script{}, fmt.Errorf("batch script %s %w", path, err)
	}
	if !sbatch.Shell(s.Interpreter) {
		return sbatch.Script{}, fmt.Errorf("batch script %s: its interpreter %s is not a shell: gpuportal runs scripts of sh, bash, dash, ksh and zsh (give another program's command after --)", path, strings.Join(s.Interpreter, " "))
	}
	return s, nil
}

// sbatchResources sets what req asks for from the script's options o,
// where the command line (its flags in set) did not: the name, GPUs,
// and a process per GPU.
func sbatchResources(req *api.SubmitRequest, o sbatch.Options, set map[string]bool, path string, note func(string, ...any)) {
	if !set["name"] {
		req.Name = o.JobName
		if req.Name == "" {
			req.Name = filepath.Base(path) // sbatch's default
		}
	}
	nodes := max(o.Nodes, 1)
	if !set["gpus"] {
		switch {
		case o.GPUs > 0:
			req.GPUs = o.GPUs
		case o.GPUsPerNode > 0:
			req.GPUs = o.GPUsPerNode * nodes
		default:
			req.GPUs = nodes
			note("asks for no GPU (--gres=gpu:N, --gpus): a gpuportal job has at least one GPU on each machine; it asks for %d", nodes)
		}
	}
	if o.Nodes > 1 {
		note("--nodes=%d: the scheduler places the job's %d GPUs, on as few machines as it can; the script runs once on each machine, with the rendezvous of docs/multinode.md", o.Nodes, req.GPUs)
	}
	perNode := o.NTasksPerNode
	if perNode == 0 && o.NTasks > 0 {
		perNode = max(o.NTasks/nodes, 1)
	}
	if perNode > 1 && !set["tasks-per-gpu"] {
		if perNode*nodes == req.GPUs {
			req.TasksPerGPU = true
			note("%d tasks a machine, one per GPU: the script runs once per GPU, each with its RANK and LOCAL_RANK (--tasks-per-gpu)", perNode)
		} else {
			// As Slurm's allocation says it (SLURM_TASKS_PER_NODE), for
			// the script's srun steps to start as many (package cli/srun).
			if req.Env == nil {
				req.Env = map[string]string{}
			}
			req.Env[srun.TasksVar] = fmt.Sprintf("%d(x%d)", perNode, nodes)
			note("%d tasks a machine: the script runs once a machine, and each srun step in it starts %d there", perNode, perNode)
		}
	}
	if !set["priority"] && o.QOS != "" {
		req.Priority = o.QOS
	}
	if !set["time"] && o.Time != "" {
		req.TimeLimit = o.Time
	}
	if !set["array"] && o.Array != "" {
		req.Array = o.Array
	}
	if !set["dependency"] && o.Dependencies != nil {
		req.Dependencies = o.Dependencies
	}
}

// sbatchEnv sets the job's working folder and environment from the
// script's options o, where the command line (its flags in set) did not;
// cwd is the submit folder.
func sbatchEnv(req *api.SubmitRequest, o sbatch.Options, set map[string]bool, cwd string, note func(string, ...any)) {
	if !set["chdir"] {
		req.Workdir = o.Chdir
		if req.Workdir == "" {
			req.Workdir = cwd // sbatch's: the submit folder
		} else if !filepath.IsAbs(req.Workdir) {
			req.Workdir = filepath.Join(cwd, req.Workdir)
		}
	}
	if req.Env == nil {
		req.Env = map[string]string{}
	}
	for _, kv := range o.Export {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			if value, ok = os.LookupEnv(name); !ok {
				continue
			}
		}
		if _, given := req.Env[name]; !given {
			req.Env[name] = value
		}
	}
	if o.ExportAll {
		note("--export=ALL: your environment is not sent to the job's machines; name the variables to send: --export=NAME,NAME=VALUE")
	}
}

// maxScriptBytes bounds a batch script: it travels in the job's command,
// which the server bounds (app.MaxCommandLen), with a little room for the
// interpreter and the output line.
const maxScriptBytes = 7 << 10

// visited are the flags of fs given on the command line.
func visited(f *jobFlags) map[string]bool { return visitedFlags(f.fs) }

// batchLine is what sbatch prints for a job it submitted.
func batchLine(id int64) string { return "Submitted batch job " + strconv.FormatInt(id, 10) }
