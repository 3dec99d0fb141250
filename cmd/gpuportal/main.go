// Command gpuportal is the GPU cluster manager: the portal and scheduler
// (serve) and, in later subcommands, the node agent and the trace simulator.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/buildinfo"
)

const usage = `gpuportal: a GPU cluster manager for deep-learning teams

Usage:
  gpuportal serve [flags]   run the portal, the API and the scheduler
  gpuportal agent [flags]   run jobs on this machine for a remote server
  gpuportal admin ...       manage users, teams and API tokens in the database
  gpuportal sim [flags]     replay a cluster trace under several policies and compare them
  gpuportal job ...         submit, list, show, cancel jobs and read their logs over the REST API
  gpuportal sbatch SCRIPT   submit a Slurm batch script, its #SBATCH directives read (docs/slurm.md)
  gpuportal squeue [flags]  list waiting and running jobs as Slurm's squeue does (-u, -t, -o FORMAT)
  gpuportal sacct [flags]   list jobs, finished too, as Slurm's sacct does (-S, -s, -j, -o FIELDS, -P)
  gpuportal scancel ID...   cancel jobs, as Slurm's scancel does (gpuportal job cancel)
  gpuportal session ...     start Jupyter, a terminal or a web app on GPUs, opened through the portal
  gpuportal login [flags]   log in to a server and save it as a context
  gpuportal logout [flags]  forget the token of a context
  gpuportal config ...      list and switch contexts (get-contexts, use-context NAME, ...)
  gpuportal version         print the versions of this client and of the server
  gpuportal completion bash|zsh|fish
                            print a shell's completion script
  gpuportal notify ...      show and set your notifications (email, webhook) over the REST API
  gpuportal accounting ...  GPU-hours allocated, used and idle per team or user (like sreport)
  gpuportal help            show this help

Run "gpuportal COMMAND -h" for the flags of a command; "gpuportal --version"
(also "serve --version", "agent --version") prints this build's version.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode prints err, if any, and returns the process's exit code: 0
// without an error or for a help request, an exitStatus's own code (job
// outcomes: see job_output.go), else 1.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	err = explain(err)
	if es, ok := isExitStatus(err); ok {
		if es.msg != "" {
			fmt.Fprintln(stderr, "gpuportal:", es.msg)
		}
		return es.code
	}
	fmt.Fprintln(stderr, "gpuportal:", err)
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stdin := os.Stdin
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve", "agent":
		if wantsVersion(args[1:]) {
			printVersion(stdout, args[0])
			return nil
		}
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "agent":
		return runAgent(ctx, args[1:], stdout, stderr)
	case agent.TerminalCommand:
		// Started by the agent as a terminal session's command.
		return runSessionTerminal(ctx, args[1:], stderr)
	case agent.TasksCommand:
		// Started by the agent as the first process of a part that runs
		// a process per GPU (core/agent/tasks.go).
		return runTasks(ctx, args[1:], stderr)
	case "agent-watchdog":
		// Started by the agent itself (core/agent/watchdog.go).
		return agent.RunWatchdog(ctx, os.Stdin, slog.New(slog.NewTextHandler(stderr, nil)).With("process", "agent-watchdog"))
	case "job":
		return newJobCmd(stdin, stdout, stderr).run(ctx, args[1:])
	case "squeue":
		// Slurm's squeue, for its users: the jobs that wait or run.
		return newJobCmd(stdin, stdout, stderr).squeue(ctx, args[1:])
	case "sacct":
		// Slurm's sacct, for its users: jobs, finished or not.
		return newJobCmd(stdin, stdout, stderr).sacct(ctx, args[1:])
	case "scancel":
		// Slurm's scancel, for its users: gpuportal job cancel ID...
		return newJobCmd(stdin, stdout, stderr).cancel(ctx, args[1:])
	case "sbatch":
		// Slurm's sbatch, for its users: gpuportal job submit SCRIPT.
		return newJobCmd(stdin, stdout, stderr).sbatch(ctx, args[1:])
	case "session":
		return newJobCmd(stdin, stdout, stderr).session(ctx, args[1:])
	case "login":
		return newJobCmd(stdin, stdout, stderr).login(ctx, args[1:])
	case "logout":
		return newJobCmd(stdin, stdout, stderr).logout(ctx, args[1:])
	case "config":
		return newJobCmd(stdin, stdout, stderr).runConfig(args[1:])
	case "version":
		return newJobCmd(stdin, stdout, stderr).version(ctx, args[1:])
	case "completion":
		return runCompletion(args[1:], stdout, stderr)
	case completeCommand:
		// Called by the completion scripts.
		return newJobCmd(stdin, stdout, stderr).complete(ctx, args[1:])
	case "notify":
		return runNotify(ctx, args[1:], stdin, stdout, stderr)
	case "accounting":
		return runAccounting(ctx, args[1:], stdout, stderr)
	case "sim":
		return runSim(ctx, args[1:], stdout, stderr)
	case "admin":
		return runAdmin(ctx, args[1:], stdin, stdout, stderr)
	case "--version", "-version":
		printVersion(stdout, "gpuportal")
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// wantsVersion reports whether a command's flags (before any "--") ask
// for the version.
func wantsVersion(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--version", "-version":
			return true
		}
	}
	return false
}

// printVersion prints the build's version line: "gpuportal serve v1.2.0
// (commit 0123456789ab, 2026-11-20T10:00:00Z, go1.26.0)".
func printVersion(w io.Writer, what string) {
	if what != "gpuportal" {
		what = "gpuportal " + what
	}
	fmt.Fprintln(w, what, buildinfo.Read())
}
