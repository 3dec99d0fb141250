//go:build nvml && cgo

package cli

import (
	"log/slog"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/gpu/nvml"
)

// openNVML opens this machine's NVIDIA GPUs through NVML.
func openNVML(log *slog.Logger) (gpu.Backend, func() error, error) {
	b, err := nvml.Open(log)
	if err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}
