package engine

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Which machines are cordoned or draining and which GPUs are out of
// service is kept in the store (NodeStateStore): the engine loads it
// when Run starts, so that it outlives a server restart and a new leader
// replica sees what the old one decided, and writes each change through
// before acting on it. A follower replica writes an
// admin's change to the store only; the leader re-reads the store once
// an Interval and applies what other replicas changed.

// NodeStates is what the store holds of the machines' scheduling state.
type NodeStates struct {
	Cordoned map[string]bool
	Draining map[string]bool
	Faults   []GPUFault // the GPUs out of service
}

// NodeStateStore is the part of Store that keeps the machines' scheduling
// state.
type NodeStateStore interface {
	// NodeStates returns the machines' state as the store has it.
	NodeStates(ctx context.Context) (NodeStates, error)
	// SetNodeCordoned and SetNodeDraining record a machine's cordon or
	// drain (on), or its end.
	SetNodeCordoned(ctx context.Context, node string, on bool, now time.Time) error
	SetNodeDraining(ctx context.Context, node string, on bool, now time.Time) error
	// RecordGPUFault takes a GPU out of service, replacing its earlier
	// fault if any.
	RecordGPUFault(ctx context.Context, f GPUFault) error
	// DeleteGPUFault puts a GPU back in service; a GPU not out of service
	// is no error.
	DeleteGPUFault(ctx context.Context, node string, index int) error
}

// nodeStateTimeout bounds a write of the machines' state made by a call
// that has no context of its own (SetCordoned, SetDraining).
const nodeStateTimeout = 10 * time.Second

// storedNodeStates is the machines' state as the engine last read it
// from the store, with the changes it wrote there since: what
// refreshNodeStates compares the store with, so that only other
// replicas' changes are applied.
type storedNodeStates struct {
	mu   sync.Mutex
	st   NodeStates
	read time.Time // when, by the engine's clock; zero: never
	gen  uint64    // counts the engine's own writes
}

// note records a change this engine wrote to the store.
func (s *storedNodeStates) note(change func(st *NodeStates)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Cordoned == nil {
		s.st.Cordoned = make(map[string]bool)
	}
	if s.st.Draining == nil {
		s.st.Draining = make(map[string]bool)
	}
	change(&s.st)
	s.gen++
}

// noteFault records a fault this engine wrote to the store (put, or
// deleted when !put).
func (s *storedNodeStates) noteFault(f GPUFault, put bool) {
	s.note(func(st *NodeStates) {
		out := st.Faults[:0:0]
		for _, g := range st.Faults {
			if g.Node != f.Node || g.Index != f.Index {
				out = append(out, g)
			}
		}
		if put {
			out = append(out, f)
		}
		st.Faults = out
	})
}

// loadNodeStates adds the store's machines' state to the engine's.
func (e *Engine) loadNodeStates(ctx context.Context) error {
	st, err := e.cfg.Store.NodeStates(ctx)
	if err != nil {
		return fmt.Errorf("load cordons, drains and GPUs out of service: %w", err)
	}
	e.stored.mu.Lock()
	e.applyNodeStates(e.stored.st, st)
	e.stored.st, e.stored.read = st, e.cfg.Now()
	e.stored.mu.Unlock()
	if len(st.Faults) > 0 || len(st.Cordoned) > 0 || len(st.Draining) > 0 {
		e.cfg.Logger.Info("machines' state loaded from the store", "cordoned", len(st.Cordoned),
			"draining", len(st.Draining), "gpus_out_of_service", len(st.Faults))
	}
	return nil
}

// refreshNodeStates picks up the cordons, drains and GPU clears made
// through other replicas: at most once an Interval, it reads the store's
// machines' state (two small tables) and applies what changed there
// besides this engine's own writes. A change that did not go through the
// store (a mirrored drain, a fault the store failed to record) is left
// alone. A read that raced with a write of this engine is dropped and
// made again on the next pass; a failed read keeps the state the engine
// has.
func (e *Engine) refreshNodeStates(ctx context.Context, now time.Time) {
	e.stored.mu.Lock()
	gen, due := e.stored.gen, e.stored.read.IsZero() || now.Sub(e.stored.read) >= e.cfg.Interval
	e.stored.mu.Unlock()
	if !due {
		return
	}
	st, err := e.cfg.Store.NodeStates(ctx)
	if err != nil {
		e.cfg.Logger.Error("re-read cordons, drains and GPUs out of service", "err", err)
		return
	}
	e.stored.mu.Lock()
	defer e.stored.mu.Unlock()
	if e.stored.gen != gen {
		return
	}
	e.applyNodeStates(e.stored.st, st)
	e.stored.st, e.stored.read = st, now
}

// applyNodeStates applies to the engine what changed in the store from
// old to cur.
func (e *Engine) applyNodeStates(old, cur NodeStates) {
	e.mu.Lock()
	cordoned := applyHolds(&e.cordoned, old.Cordoned, cur.Cordoned)
	draining := applyHolds(&e.draining, old.Draining, cur.Draining)
	e.mu.Unlock()
	for _, c := range cordoned {
		e.cfg.Logger.Info("cordon changed in the store", "node", c.node, "cordoned", c.on)
	}
	for _, c := range draining {
		e.cfg.Logger.Info("drain changed in the store", "node", c.node, "draining", c.on)
	}
	for _, f := range e.health.apply(old.Faults, cur.Faults) {
		e.cfg.Logger.Info("GPU back in service: its fault was cleared in the store", "node", f.Node, "gpu", f.Index)
	}
}

// holdChange is a machine whose cordon or drain the store changed.
type holdChange struct {
	node string
	on   bool
}

// applyHolds sets in flags the machines held in cur but not in old, and
// clears those held in old but not in cur. It returns what it changed.
func applyHolds(flags *map[string]bool, old, cur map[string]bool) []holdChange {
	if *flags == nil {
		*flags = make(map[string]bool)
	}
	var out []holdChange
	for n, on := range cur {
		if on && !old[n] {
			if !(*flags)[n] {
				out = append(out, holdChange{n, true})
			}
			(*flags)[n] = true
		}
	}
	for n, on := range old {
		if on && !cur[n] {
			if (*flags)[n] {
				out = append(out, holdChange{n, false})
			}
			delete(*flags, n)
		}
	}
	return out
}

// writeForLeader records a machine's cordon or drain, made on a follower,
// in the store, for the leader's next pass (refreshNodeStates). A
// follower cannot tell whether the machine is connected: a hold of a
// machine not connected takes effect when it connects.
func (e *Engine) writeForLeader(name string, write func(ns NodeStateStore, ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), nodeStateTimeout)
	defer cancel()
	if err := write(e.cfg.Store, ctx); err != nil {
		return fmt.Errorf("record the state of %s for the leader: %w", name, err)
	}
	return nil
}

// StoredNodeStates returns the machines' state as the store has it: what
// a follower, which runs no machines, knows of them.
func (e *Engine) StoredNodeStates(ctx context.Context) (NodeStates, error) {
	st, err := e.cfg.Store.NodeStates(ctx)
	if err != nil {
		return st, fmt.Errorf("read cordons, drains and GPUs out of service: %w", err)
	}
	return st, nil
}

// clearStoredGPUFault puts a GPU back in service from a follower: it
// deletes the store's fault, and the leader's next pass
// (refreshNodeStates) lets the GPU take jobs again.
func (e *Engine) clearStoredGPUFault(node string, index int) error {
	ctx, cancel := context.WithTimeout(context.Background(), nodeStateTimeout)
	defer cancel()
	st, err := e.StoredNodeStates(ctx)
	if err != nil {
		return err
	}
	for _, f := range st.Faults {
		if f.Node == node && f.Index == index {
			if err := e.cfg.Store.DeleteGPUFault(ctx, node, index); err != nil {
				return fmt.Errorf("put GPU %s/%d back in service: %w", node, index, err)
			}
			return nil
		}
	}
	return fmt.Errorf("GPU %s/%d: %w", node, index, ErrGPUHealthy)
}

// setNodeFlag records a machine's cordon or drain in the store (unless
// write is nil), then in flags. The machine must be connected. On a
// follower it records it in the store only, for the leader.
func (e *Engine) setNodeFlag(name string, on bool, flags *map[string]bool,
	write func(ns NodeStateStore, ctx context.Context) error) error {
	if e.follower.Load() && write != nil {
		return e.writeForLeader(name, write)
	}
	e.mu.Lock()
	_, ok := e.nodes[name]
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: %w", name, ErrUnknownNode)
	}
	if write != nil {
		ctx, cancel := context.WithTimeout(context.Background(), nodeStateTimeout)
		defer cancel()
		if err := write(e.cfg.Store, ctx); err != nil {
			return fmt.Errorf("record the state of %s: %w", name, err)
		}
		e.stored.note(func(st *NodeStates) {
			held := st.Draining
			if flags == &e.cordoned {
				held = st.Cordoned
			}
			held[name] = on
		})
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
