package salussim

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

// Sharing says whether jobs may share a GPU.
type Sharing string

// The sharing modes.
const (
	// SharingNone gives every job whole GPUs, fractional or not.
	SharingNone Sharing = "none"
	// SharingSalus co-locates fractional jobs in lanes; whole-GPU jobs
	// stay exclusive.
	SharingSalus Sharing = "salus"
)

// ParseSharing checks a sharing mode's name.
func ParseSharing(s string) (Sharing, error) {
	switch m := Sharing(strings.ToLower(strings.TrimSpace(s))); m {
	case SharingNone, SharingSalus:
		return m, nil
	}
	return "", fmt.Errorf("unknown sharing %q (known: none, salus)", s)
}

// Config is one simulation's setup. Zero fields take the defaults.
type Config struct {
	// GPUs is the number of identical GPUs; required.
	GPUs int
	// GPUMemMiB is each GPU's memory. A job's memory is derived as a
	// share of it (see PersistentShare), so it only sets the unit.
	// Default 16,384 (a 16 GB V100, T4 or P100 of the openb cluster).
	GPUMemMiB int64
	// Sharing is SharingNone (default) or SharingSalus.
	Sharing Sharing
	// Lanes configures the lane manager: the iteration policy within a
	// lane, the padding, the aging.
	Lanes lanes.Config
	// PersistentShare is P's share of a fractional job's memory
	// (gpu_milli/1000 x GPUMemMiB); E takes the rest. Default
	// memest.DefaultPersistentShare (0.2).
	PersistentShare float64
	// IterationS is the length, in seconds of work, of one simulated
	// iteration: the granularity at which jobs in one lane take turns.
	// Default 60.
	IterationS float64
	// ShareSlowdown is the fraction of speed a job loses while its GPU
	// hosts other jobs too (switching and interference), 0 by default.
	ShareSlowdown float64
}

// Defaults.
const (
	DefaultGPUMemMiB  = 16 * 1024
	DefaultIterationS = 60
)

// normalized checks c and fills in the defaults.
func (c Config) normalized() (Config, error) {
	if c.GPUs < 1 {
		return c, fmt.Errorf("salussim: %d GPUs: want at least 1", c.GPUs)
	}
	if c.Sharing == "" {
		c.Sharing = SharingNone
	}
	if _, err := ParseSharing(string(c.Sharing)); err != nil {
		return c, fmt.Errorf("salussim: %w", err)
	}
	if c.GPUMemMiB == 0 {
		c.GPUMemMiB = DefaultGPUMemMiB
	}
	if c.PersistentShare == 0 {
		c.PersistentShare = memest.DefaultPersistentShare
	}
	if c.IterationS == 0 {
		c.IterationS = DefaultIterationS
	}
	switch {
	case c.GPUMemMiB < 1:
		return c, fmt.Errorf("salussim: GPU memory %d MiB", c.GPUMemMiB)
	case !(c.PersistentShare > 0 && c.PersistentShare < 1):
		return c, fmt.Errorf("salussim: persistent share %v: want between 0 and 1", c.PersistentShare)
	case !(c.IterationS > 0) || math.IsInf(c.IterationS, 1):
		return c, fmt.Errorf("salussim: iteration %v s: want a positive number", c.IterationS)
	case !(c.ShareSlowdown >= 0 && c.ShareSlowdown < 1):
		return c, fmt.Errorf("salussim: share slowdown %v: want 0 to below 1", c.ShareSlowdown)
	}
	return c, nil
}
