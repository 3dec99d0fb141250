// Command gpuportal-sim is `gpuportal sim` alone: the same command, flags
// and output (package cli/simcmd), in a binary that links the simulator
// and none of the server, the store or the cluster back ends. It starts
// in about twice the CPU time of an empty Go program where gpuportal,
// initialising the packages of all its commands, takes ten times: what
// matters when a replay itself takes tens of milliseconds
// (docs/simulator.md, "Fourth round"). --from-db, which needs the store,
// is gpuportal sim's only.
//
//	go build -o gpuportal-sim ./cmd/gpuportal-sim
//
// Built with CGO_ENABLED=0 it is a static binary (cobra's flags import
// net, whose cgo resolver otherwise links libc): it needs no cgo, starts
// in about 1 ms less CPU and replays openb's first 4,000 jobs in 4% less
// (docs/simulator.md, "Sixth round").
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpuportal/gpuportal/cli/simcmd"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cmd := simcmd.Command(os.Stdout, os.Stderr, nil)
	cmd.Use = "gpuportal-sim" + cmd.Use[len("sim"):]
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
	})
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpuportal-sim:", err)
		os.Exit(1)
	}
}
