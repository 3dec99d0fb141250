package cli

import (
	"context"
	"flag"
	"io"

	"github.com/gpuportal/gpuportal/core/agent"
)

// runTasks is "gpuportal run-tasks --tasks N --first-rank R -- COMMAND...",
// which the agent starts as a part's first process to run its command
// once per GPU (core/agent/tasks.go).
func runTasks(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(agent.TasksCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("tasks", 1, "how many times to start the command")
	first := fs.Int("first-rank", 0, "the RANK of the first task")
	grace := fs.Duration("grace", agent.TasksGrace, "time the other tasks get between SIGTERM and SIGKILL once one failed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if code := agent.RunTasks(ctx, agent.Tasks{N: *n, FirstRank: *first}, fs.Args(), *grace, stderr); code != 0 {
		return &exitStatus{code: code}
	}
	return nil
}
