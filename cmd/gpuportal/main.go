// Command gpuportal is the GPU cluster manager: the portal and scheduler
// (serve), the node agent, the trace simulator and the command line of the
// REST API, in one binary. It only wires: the commands are package cli's,
// the server that serve runs is package server's.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpuportal/gpuportal/cli"
	"github.com/gpuportal/gpuportal/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], server.Define)
	stop()
	os.Exit(code)
}
