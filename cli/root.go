// Package cli is gpuportal's command line, on cobra: every command with
// its own flags, --help and shell completion. The client commands call
// the REST API through package client; serve runs the server that main
// hands Main (server.Define); agent assembles core/agent on this machine.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/gpuportal/gpuportal/cli/simcmd"
	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/jobfiles/filehttp"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/spf13/pflag"

	"github.com/spf13/cobra"

	"github.com/gpuportal/gpuportal/core/buildinfo"
)

// Serve defines serve's flags on fs and returns what runs the server once
// they are parsed: the server assembly (server.Define), which the command
// line knows only so.
type Serve func(fs *pflag.FlagSet) (run func(ctx context.Context, stdout, stderr io.Writer) error)

// Main runs the command that args name, with serve as the server, and
// returns the process's exit code.
func Main(ctx context.Context, args []string, serve Serve) int {
	c := newJobCmd(os.Stdin, os.Stdout, os.Stderr)
	c.serve = serve
	return exitCode(c.execute(ctx, args), os.Stderr)
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

// The command tree: every command is a cobra.Command with its own flags,
// --help, and the completions cobra's scripts ask for (gpuportal
// completion bash|zsh|fish).

// root builds gpuportal's commands over c's surroundings.
func (c jobCmd) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "gpuportal",
		Short: "a GPU cluster manager for deep-learning teams",
		Long: `gpuportal: a GPU cluster manager for deep-learning teams.

Run "gpuportal COMMAND --help" for the flags of a command; "gpuportal
--version" (also "serve --version", "agent --version") prints this build's
version.`,
		Version:       buildinfo.Read().String(),
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
			return errors.New("no command given")
		},
	}
	root.SetVersionTemplate("gpuportal {{.Version}}\n")
	root.SetIn(c.stdin)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(c.commands()...)
	// cobra's own: gpuportal completion bash|zsh|fish|powershell.
	root.InitDefaultCompletionCmd()
	if cmd, _, err := root.Find([]string{"completion"}); err == nil && cmd != root {
		groupRun(cmd)
	}
	return root
}

// execute runs the command that args name.
func (c jobCmd) execute(ctx context.Context, args []string) error {
	root := c.root()
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// commands are gpuportal's commands.
func (c jobCmd) commands() []*cobra.Command {
	stderr := c.stderr
	cmds := []*cobra.Command{
		agentCommand(c.stdout, c.stderr),
		// Started by the agent as a terminal session's command.
		passThrough(agent.TerminalCommand, "", true, func(ctx context.Context, args []string) error { return runSessionTerminal(ctx, args, stderr) }),
		// Started by the agent as the first process of a part that runs
		// a process per GPU (core/agent/tasks.go).
		passThrough(agent.TasksCommand, "", true, func(ctx context.Context, args []string) error { return runTasks(ctx, args, stderr) }),
		// Started by the agent as a job's account to serve its files
		// (core/agent/files.go).
		passThrough(agent.FilesCommand, "", true, func(ctx context.Context, args []string) error {
			return filehttp.RunHelper(ctx, args, os.Stdin, os.Stdout, stderr)
		}),
		// Started by the agent itself (core/agent/watchdog.go).
		passThrough("agent-watchdog", "", true, func(ctx context.Context, _ []string) error {
			return agent.RunWatchdog(ctx, c.stdin, slog.New(slog.NewTextHandler(stderr, nil)).With("process", "agent-watchdog"))
		}),
		c.adminCommand(),
		simcmd.Command(c.stdout, c.stderr, simFromDB),
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
	if c.serve != nil {
		cmds = append(cmds, c.serveCommand())
	}
	return cmds
}

// serveCommand is "gpuportal serve": the portal, the API and the
// scheduler, as c.serve assembles them.
func (c jobCmd) serveCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "serve [flags]", Short: "run the portal, the API and the scheduler"}
	version := versionFlag(cmd, c.stdout)
	run := c.serve(cmd.Flags())
	completeValues(cmd, "policy", sched.Policies(), "scheduling policy")
	completeValues(cmd, "log-level", []string{"debug", "info", "warn", "error"}, "log level")
	completeValues(cmd, "executor", []string{"agents", "slurm", "kubernetes"}, "executor")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if version() {
			return nil
		}
		if len(args) > 0 {
			return fmt.Errorf("serve: unexpected argument %q", args[0])
		}
		return run(cmd.Context(), c.stdout, c.stderr)
	}
	return cmd
}

// flagError names the command whose flags were wrong and where to read
// them.
func flagError(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%s: %w (see %s --help)", commandName(cmd), err, cmd.CommandPath())
}

// commandName is a command's path without "gpuportal ": "job list".
func commandName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Name()
	}
	_, name, _ := strings.Cut(cmd.CommandPath(), " ")
	return name
}

// group makes cmd a command that only holds subs: without one, or with an
// unknown one, it fails with its usage.
func group(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	groupRun(cmd)
	cmd.AddCommand(subs...)
	return cmd
}

// groupRun makes cmd, which holds others, fail with its usage when run
// without one of them.
func groupRun(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 && args[0] == "help" {
			return cmd.Help()
		}
		fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
		if len(args) == 0 {
			return fmt.Errorf("%s: no command given", commandName(cmd))
		}
		return fmt.Errorf("%s: unknown command %q", commandName(cmd), args[0])
	}
}

// passThrough is a command that parses its own arguments with run.
func passThrough(use, short string, hidden bool, run func(ctx context.Context, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Hidden: hidden,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), args)
		},
	}
}

// versionFlag adds --version to a command that runs for long (serve,
// agent): it prints the build's version instead of running.
func versionFlag(cmd *cobra.Command, w io.Writer) func() bool {
	v := cmd.Flags().Bool("version", false, "print this build's version and exit")
	return func() bool {
		if *v {
			printVersion(w, cmd.Name())
		}
		return *v
	}
}

// completeValues completes the values of cmd's flag name with values,
// each described as desc.
func completeValues(cmd *cobra.Command, name string, values []string, desc string) {
	_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(described(values, desc), cobra.ShellCompDirectiveNoFileComp))
}

// visitedFlags are the flags of fs given on the command line.
func visitedFlags(fs *pflag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *pflag.Flag) { set[fl.Name] = true })
	return set
}

// printVersion prints the build's version line: "gpuportal serve v1.2.0
// (commit 0123456789ab, 2026-11-20T10:00:00Z, go1.26.0)".
func printVersion(w io.Writer, what string) {
	if what != "gpuportal" {
		what = "gpuportal " + what
	}
	fmt.Fprintln(w, what, buildinfo.Read())
}
