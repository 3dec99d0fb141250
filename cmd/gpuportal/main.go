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
)

const usage = `gpuportal: a GPU cluster manager for deep-learning teams

Usage:
  gpuportal serve [flags]   run the portal, the API and the scheduler
  gpuportal agent [flags]   run jobs on this machine for a remote server
  gpuportal admin ...       manage users, teams and API tokens in the database
  gpuportal sim [flags]     replay a cluster trace under several policies and compare them
  gpuportal job ...         submit, list, show, cancel jobs and read their logs over the REST API
  gpuportal accounting ...  GPU-hours allocated, used and idle per team or user (like sreport)
  gpuportal help            show this help

Run "gpuportal COMMAND -h" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpuportal:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "agent":
		return runAgent(ctx, args[1:], stdout, stderr)
	case "agent-watchdog":
		// Started by the agent itself (core/agent/watchdog.go).
		return agent.RunWatchdog(ctx, os.Stdin, slog.New(slog.NewTextHandler(stderr, nil)).With("process", "agent-watchdog"))
	case "job":
		return runJob(ctx, args[1:], stdout, stderr)
	case "accounting":
		return runAccounting(ctx, args[1:], stdout, stderr)
	case "sim":
		return runSim(ctx, args[1:], stdout, stderr)
	case "admin":
		return runAdmin(ctx, args[1:], os.Stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
