// Command gpuportal is the GPU cluster manager: the portal and scheduler
// (serve), the node agent, the trace simulator and the command line of the
// REST API, in one binary. It only wires: the commands are package cli's,
// the server that serve runs is package server's.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gpuportal/gpuportal/cli"
	"github.com/gpuportal/gpuportal/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if filepath.Base(os.Args[0]) == cli.SrunName {
		// Started as srun inside a job (the agent's link to this binary).
		code = cli.Srun(ctx, os.Args[1:], os.Stderr)
	} else {
		code = cli.Main(ctx, os.Args[1:], server.Define)
	}
	stop()
	os.Exit(code)
}
