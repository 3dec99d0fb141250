// Package slurm runs gpuportal's jobs on an existing Slurm cluster:
// gpuportal's core decides the order and the placement, and Slurm executes
// exactly that. Each Slurm node becomes an engine node; a job's run is a
// Slurm batch job submitted held and pinned to the node and GPUs the core
// chose, then released.
//
// Slurm is driven through a small interface, Client. CLI implements it with
// Slurm's command-line tools (sbatch, scontrol, scancel, and squeue and
// sinfo with --json), run with argument lists and never through a shell.
// The parsers read the JSON of Slurm 22.05 (OpenAPI plugin v0.0.38). See
// docs/slurm.md for what the operator sets up.
package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Client is what gpuportal asks of Slurm. CLI implements it with Slurm's
// command-line tools; a slurmrestd client could be another (see
// docs/slurm.md for what slurmrestd cannot do in Slurm 22.05).
type Client interface {
	// Submit submits a batch job and returns its Slurm job ID.
	Submit(ctx context.Context, s Submission) (int64, error)
	// Release lets a held job start.
	Release(ctx context.Context, id int64) error
	// Signal sends a signal (a name such as "TERM") to every process of a
	// running job, its batch script included.
	Signal(ctx context.Context, id int64, signal string) error
	// Cancel ends a job: a pending one at once, a running one with SIGTERM
	// then, after Slurm's KillWait, SIGKILL.
	Cancel(ctx context.Context, id int64) error
	// Jobs lists the jobs Slurm knows: pending, running, and those that
	// ended recently (MinJobAge, 300 s by default).
	Jobs(ctx context.Context) ([]Job, error)
	// Nodes lists the cluster's nodes.
	Nodes(ctx context.Context) ([]Node, error)
}

// Submission is one batch job to submit: one run of a gpuportal job on
// one node.
type Submission struct {
	Name      string // --job-name
	Comment   string // --comment
	Partition string // empty: Slurm's default partition
	Node      string // the one node it runs on (--nodelist)
	GPUs      int    // --gres=gpu:N; 0 asks for none
	CPUs      int    // --cpus-per-task
	MemMiB    int64  // --mem, in MiB; must be positive (0 means all to Slurm)
	Dir       string // working folder on the node (--chdir)
	Output    string // output file (stdout and stderr), appended to
	User      string // --uid: the user it runs as; empty: the submitter
	Group     string // --gid: its group (the user's primary group); empty: Slurm's choice
	Held      bool   // submitted held, to be released (--hold)
	// Script is the batch script, a file on the machine that submits; Args
	// are its arguments, passed as they are.
	Script string
	Args   []string
	// Env is sbatch's whole environment, which the job inherits
	// (--export=ALL); nil inherits gpuportal's own, which Start never does.
	Env []string
}

// Runner runs one command and returns its standard output. The command is
// a program and its arguments, never a shell string.
type Runner interface {
	Run(ctx context.Context, env []string, name string, args ...string) ([]byte, error)
}

// ExecRunner runs Slurm's commands as child processes.
type ExecRunner struct {
	// Bin is the folder of Slurm's commands; empty finds them in PATH.
	Bin string
}

// CommandError is the failure of a Slurm command: what it was asked, how
// it ended and what it said on standard error.
type CommandError struct {
	Args   []string // the command and its arguments
	Err    error
	Stderr string
}

// maxArgsShown bounds the command line quoted in a CommandError: a job's
// command can be long.
const maxArgsShown = 200

func (e *CommandError) Error() string {
	msg := truncate(strings.Join(e.Args, " "), maxArgsShown) + ": " + e.Err.Error()
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

// maxStderr bounds the standard error kept in a CommandError.
const maxStderr = 1024

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	path := name
	if r.Bin != "" {
		path = filepath.Join(r.Bin, name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	if env != nil {
		cmd.Env = env
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > maxStderr {
			msg = msg[:maxStderr] + "..."
		}
		return stdout.Bytes(), &CommandError{Args: append([]string{name}, args...), Err: err, Stderr: msg}
	}
	return stdout.Bytes(), nil
}

// CLI drives Slurm through its command-line tools.
type CLI struct {
	Runner Runner
}

var _ Client = CLI{}

// SubmitArgs is the sbatch command line for s.
func SubmitArgs(s Submission) ([]string, error) {
	if s.Node == "" || s.Script == "" || s.Output == "" || s.Dir == "" {
		return nil, errors.New("submission needs a node, a script, an output file and a folder")
	}
	if s.CPUs < 1 || s.MemMiB < 1 || s.GPUs < 0 {
		return nil, fmt.Errorf("submission asks for %d CPUs, %d MiB, %d GPUs", s.CPUs, s.MemMiB, s.GPUs)
	}
	args := []string{"--parsable"}
	if s.Held {
		args = append(args, "--hold")
	}
	if s.Name != "" {
		args = append(args, "--job-name="+s.Name)
	}
	if s.Comment != "" {
		args = append(args, "--comment="+s.Comment)
	}
	if s.Partition != "" {
		args = append(args, "--partition="+s.Partition)
	}
	args = append(args,
		"--nodelist="+s.Node, "--nodes=1", "--ntasks=1",
		"--cpus-per-task="+strconv.Itoa(s.CPUs),
		"--mem="+strconv.FormatInt(s.MemMiB, 10)+"M",
	)
	if s.GPUs > 0 {
		args = append(args, "--gres=gpu:"+strconv.Itoa(s.GPUs))
	}
	if s.User != "" {
		args = append(args, "--uid="+s.User)
	}
	if s.Group != "" {
		// Without it, a job sbatch submits as root for another user keeps
		// root's group.
		args = append(args, "--gid="+s.Group)
	}
	args = append(args,
		"--chdir="+s.Dir, "--output="+s.Output, "--open-mode=append",
		// gpuportal requeues, not Slurm: a run that ends is over.
		"--no-requeue", "--export=ALL",
		"--", s.Script)
	return append(args, s.Args...), nil
}

// Submit implements Client with sbatch.
func (c CLI) Submit(ctx context.Context, s Submission) (int64, error) {
	args, err := SubmitArgs(s)
	if err != nil {
		return 0, fmt.Errorf("sbatch: %w", err)
	}
	out, err := c.Runner.Run(ctx, s.Env, "sbatch", args...)
	if err != nil {
		return 0, err
	}
	// --parsable prints "ID" or "ID;CLUSTER".
	line := strings.TrimSpace(string(out))
	idText, _, _ := strings.Cut(line, ";")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("sbatch: no job ID in its answer %q", truncate(line, 200))
	}
	return id, nil
}

// Release implements Client with scontrol release.
func (c CLI) Release(ctx context.Context, id int64) error {
	_, err := c.Runner.Run(ctx, nil, "scontrol", "release", strconv.FormatInt(id, 10))
	return err
}

// Signal implements Client with scancel --full: without it the signal
// reaches the job's steps but not its batch script.
func (c CLI) Signal(ctx context.Context, id int64, signal string) error {
	_, err := c.Runner.Run(ctx, nil, "scancel", "--full", "--signal="+signal, strconv.FormatInt(id, 10))
	return err
}

// Cancel implements Client with scancel.
func (c CLI) Cancel(ctx context.Context, id int64) error {
	_, err := c.Runner.Run(ctx, nil, "scancel", strconv.FormatInt(id, 10))
	return err
}

// Jobs implements Client with squeue --json, which lists every job (it
// ignores -j and --states in Slurm 22.05).
func (c CLI) Jobs(ctx context.Context) ([]Job, error) {
	out, err := c.Runner.Run(ctx, nil, "squeue", "--json")
	if err != nil {
		return nil, err
	}
	jobs, err := ParseJobs(out)
	if err != nil {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	return jobs, nil
}

// Nodes implements Client with sinfo --json.
func (c CLI) Nodes(ctx context.Context) ([]Node, error) {
	out, err := c.Runner.Run(ctx, nil, "sinfo", "--json")
	if err != nil {
		return nil, err
	}
	nodes, err := ParseNodes(out)
	if err != nil {
		return nil, fmt.Errorf("sinfo --json: %w", err)
	}
	return nodes, nil
}

// truncate shortens s to at most n bytes of valid UTF-8.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
