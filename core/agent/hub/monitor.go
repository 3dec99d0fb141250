package hub

import (
	"context"
	"errors"

	"github.com/gpuportal/gpuportal/core/engine"
)

// A monitor-only agent (gpuportal agent --monitor-only) watches the GPUs
// of a machine whose jobs another system runs (Slurm's nodes under serve
// --executor slurm). Its machines join the engine as monitors, not as
// nodes: the engine never starts jobs through them, and the node of the
// same name (the Slurm executor's) reads its GPU samples from them.

// monitorRegistry is the part of the engine that monitors join.
// *engine.Engine implements it.
type monitorRegistry interface {
	AddMonitor(ctx context.Context, m engine.Monitor) error
	RemoveMonitor(ctx context.Context, name string) error
}

var _ monitorRegistry = (*engine.Engine)(nil)

// errNoMonitors refuses a monitor-only agent where the engine takes none.
var errNoMonitors = errors.New("this server takes no monitor-only agents")

// join adds a machine an agent registers: as a node, or as a monitor.
func (h *Hub) join(ctx context.Context, rn *remoteNode) error {
	if !rn.monitor {
		return h.registry.AddNode(ctx, rn)
	}
	mr, ok := h.registry.(monitorRegistry)
	if !ok {
		return errNoMonitors
	}
	return mr.AddMonitor(ctx, rn)
}

// leave removes a machine an agent registered; nil is none.
func (h *Hub) leave(ctx context.Context, rn *remoteNode) error {
	if rn == nil {
		return nil
	}
	if !rn.monitor {
		return h.registry.RemoveNode(ctx, rn.name)
	}
	mr, ok := h.registry.(monitorRegistry)
	if !ok {
		return errNoMonitors
	}
	return mr.RemoveMonitor(ctx, rn.name)
}
