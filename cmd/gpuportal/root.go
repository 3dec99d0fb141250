package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuportal/gpuportal/core/buildinfo"
	"github.com/spf13/pflag"
)

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
