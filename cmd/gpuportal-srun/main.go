// Command gpuportal-srun is Slurm's srun inside a gpuportal job (package cli/srun,
// docs/slurm.md, "srun inside a job"), alone, for container jobs: the
// agent mounts it into each container at /usr/local/bin/srun, where the
// image's own libraries are not the machine's, so it is built without
// cgo and needs none:
//
//	CGO_ENABLED=0 go build -o gpuportal-srun ./cmd/gpuportal-srun
//
// and installed beside the agent's binary, where the agent finds it
// (or named by agent --container-srun). Command jobs use the agent's own
// binary, linked as srun on their PATH.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpuportal/gpuportal/cli/srun"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := srun.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
