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

	"github.com/spf13/cobra"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/buildinfo"
)

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
	return newJobCmd(os.Stdin, stdout, stderr).execute(ctx, args)
}

// commands are gpuportal's commands.
func (c jobCmd) commands() []*cobra.Command {
	stderr := c.stderr
	return []*cobra.Command{
		serveCommand(c.stdout, c.stderr),
		agentCommand(c.stdout, c.stderr),
		// Started by the agent as a terminal session's command.
		passThrough(agent.TerminalCommand, "", true, func(ctx context.Context, args []string) error { return runSessionTerminal(ctx, args, stderr) }),
		// Started by the agent as the first process of a part that runs
		// a process per GPU (core/agent/tasks.go).
		passThrough(agent.TasksCommand, "", true, func(ctx context.Context, args []string) error { return runTasks(ctx, args, stderr) }),
		// Started by the agent itself (core/agent/watchdog.go).
		passThrough("agent-watchdog", "", true, func(ctx context.Context, _ []string) error {
			return agent.RunWatchdog(ctx, c.stdin, slog.New(slog.NewTextHandler(stderr, nil)).With("process", "agent-watchdog"))
		}),
		c.adminCommand(),
		simCommand(c.stdout, c.stderr),
		c.jobCommand(),
		// Slurm's sbatch, squeue, sacct and scancel, for its users.
		c.sbatchCommand(),
		c.squeueCommand(),
		c.sacctCommand(),
		c.cancelCommand("scancel", "cancel jobs, as Slurm's scancel does (gpuportal job cancel)"),
		c.sessionCommand(),
		c.loginCommand(),
		c.logoutCommand(),
		c.configCommand(),
		c.versionCommand(),
		notifyCmd{c}.notifyCommand(),
		c.accountingCommand(),
	}
}

// printVersion prints the build's version line: "gpuportal serve v1.2.0
// (commit 0123456789ab, 2026-11-20T10:00:00Z, go1.26.0)".
func printVersion(w io.Writer, what string) {
	if what != "gpuportal" {
		what = "gpuportal " + what
	}
	fmt.Fprintln(w, what, buildinfo.Read())
}
