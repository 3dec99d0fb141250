package engine

import (
	"context"
	"fmt"
	"time"
)

// Which machines are cordoned or draining and which GPUs are out of
// service is kept in the store when it can keep it (NodeStateStore): the
// engine loads it when Run starts, so that it outlives a server restart
// and a new leader replica sees what the old one decided, and writes each
// change through before acting on it. With a store that cannot, it lives
// in memory only.

// NodeStates is what the store holds of the machines' scheduling state.
type NodeStates struct {
	Cordoned map[string]bool
	Draining map[string]bool
	Faults   []GPUFault // the GPUs out of service
}

// NodeStateStore is a Store that keeps the machines' scheduling state.
type NodeStateStore interface {
	NodeStates(ctx context.Context) (NodeStates, error)
	SetNodeCordoned(ctx context.Context, node string, on bool, now time.Time) error
	SetNodeDraining(ctx context.Context, node string, on bool, now time.Time) error
	RecordGPUFault(ctx context.Context, f GPUFault) error
	// DeleteGPUFault puts a GPU back in service; a GPU not out of service
	// is no error.
	DeleteGPUFault(ctx context.Context, node string, index int) error
}

// nodeStateTimeout bounds a write of the machines' state made by a call
// that has no context of its own (SetCordoned, SetDraining).
const nodeStateTimeout = 10 * time.Second

// nodeStates returns the store that keeps the machines' state, or nil.
func (e *Engine) nodeStates() NodeStateStore {
	ns, _ := e.cfg.Store.(NodeStateStore)
	return ns
}

// loadNodeStates adds the store's machines' state to the engine's.
func (e *Engine) loadNodeStates(ctx context.Context) error {
	ns := e.nodeStates()
	if ns == nil {
		return nil
	}
	st, err := ns.NodeStates(ctx)
	if err != nil {
		return fmt.Errorf("load cordons, drains and GPUs out of service: %w", err)
	}
	e.mu.Lock()
	if e.cordoned == nil {
		e.cordoned = make(map[string]bool)
	}
	for n, on := range st.Cordoned {
		if on {
			e.cordoned[n] = true
		}
	}
	for n, on := range st.Draining {
		if on {
			e.draining[n] = true
		}
	}
	e.mu.Unlock()
	e.health.load(st.Faults)
	if len(st.Faults) > 0 || len(st.Cordoned) > 0 || len(st.Draining) > 0 {
		e.cfg.Logger.Info("machines' state loaded from the store", "cordoned", len(st.Cordoned),
			"draining", len(st.Draining), "gpus_out_of_service", len(st.Faults))
	}
	return nil
}

// setNodeFlag records a machine's cordon or drain in the store (unless
// write is nil), then in flags. The machine must be connected.
func (e *Engine) setNodeFlag(name string, on bool, flags *map[string]bool,
	write func(ns NodeStateStore, ctx context.Context) error) error {
	e.mu.Lock()
	_, ok := e.nodes[name]
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: %w", name, ErrUnknownNode)
	}
	if ns := e.nodeStates(); ns != nil && write != nil {
		ctx, cancel := context.WithTimeout(context.Background(), nodeStateTimeout)
		defer cancel()
		if err := write(ns, ctx); err != nil {
			return fmt.Errorf("record the state of %s: %w", name, err)
		}
	}
	e.mu.Lock()
	if *flags == nil {
		*flags = make(map[string]bool)
	}
	if on {
		(*flags)[name] = true
	} else {
		delete(*flags, name)
	}
	e.mu.Unlock()
	e.Wake()
	return nil
}
