package cli

import (
	"context"
	"io"

	"github.com/gpuportal/gpuportal/cli/srun"
)

// SrunName is the name under which gpuportal's binary is srun: the
// agent links it so on command jobs' PATH (core/agent/srun.go).
const SrunName = srun.Name

// Srun is srun inside a job (package cli/srun), which main runs when the
// binary is started as SrunName.
func Srun(ctx context.Context, args []string, stderr io.Writer) int {
	return srun.Main(ctx, args, stderr)
}
