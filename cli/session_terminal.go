package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/terminal"
)

// runSessionTerminal serves a terminal session: the agent starts it as the
// session's command (core/agent/session.go), as the job's account.
func runSessionTerminal(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet(agent.TerminalCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "loopback address to serve the terminal on (127.0.0.1:PORT)")
	shell := fs.String("shell", "/bin/sh", "the shell to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" {
		return fmt.Errorf("--listen is required")
	}
	token := os.Getenv("GPUPORTAL_SESSION_TOKEN")
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GPUPORTAL_SESSION_TOKEN=") {
			env = append(env, kv)
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("process", agent.TerminalCommand)
	code, err := terminal.Serve(ctx, *listen, *shell, token, env, log)
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitStatus{code: code}
	}
	return nil
}
