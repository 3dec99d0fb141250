//go:build !nvml || !cgo

package cli

import (
	"errors"
	"log/slog"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// errNoNVML explains how to get a binary that reads NVIDIA GPUs.
var errNoNVML = errors.New("--gpus nvml: this gpuportal was built without NVML support; " +
	"build it with `CGO_ENABLED=1 go build -tags nvml ./cmd/gpuportal` (needs a C compiler; " +
	"the NVIDIA driver's NVML library is loaded at run time), or pass --gpus sim:1x4x80 for simulated GPUs")

// openNVML fails: this binary was built without the nvml build tag.
func openNVML(*slog.Logger) (gpu.Backend, func() error, error) {
	return nil, nil, errNoNVML
}
