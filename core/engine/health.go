package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// GPU health: every pass reads each GPU's error counters (uncorrected ECC
// errors, critical XID errors). A GPU whose counters grow has failed: it
// is marked unhealthy and takes no new jobs until an admin clears it, and
// a job that fails on it during its run is requeued as an infrastructure
// failure, which does not count against the job's retries. The GPUs out
// of service are kept in the store where it can (nodestate.go).

// GPUFault is a GPU taken out of service because it reported an error.
type GPUFault struct {
	gpu.Ref
	// Reason says what the GPU reported, such as "GPU node-1/2 reported
	// XID 79 (GPU fell off the bus)".
	Reason string
	At     time.Time
}

// gpuErrors is what a GPU's error counters read.
type gpuErrors struct {
	ecc, xids uint64
}

// health tracks the GPUs' error counters and the GPUs they took out of
// service. The Run goroutine observes; admins read and clear.
type health struct {
	mu     sync.Mutex
	seen   map[gpu.Ref]gpuErrors
	faults map[gpu.Ref]GPUFault
}

// observe compares a machine's samples with its counters' last readings
// and records the GPUs that failed since. The first reading of a GPU is
// its baseline: errors from before gpuportal watched it (since the driver
// loaded) do not take it out of service. Counters that go down (the
// agent restarted) become the new baseline.
func (h *health) observe(node string, ss []gpu.Sample, now time.Time) []GPUFault {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = make(map[gpu.Ref]gpuErrors)
		h.faults = make(map[gpu.Ref]GPUFault)
	}
	var out []GPUFault
	for _, s := range ss {
		k := gpu.Ref{Node: node, Index: s.Index}
		cur := gpuErrors{ecc: s.ECCErrors, xids: s.XIDErrors}
		prev, known := h.seen[k]
		h.seen[k] = cur
		if !known || cur.ecc < prev.ecc || cur.xids < prev.xids {
			continue
		}
		var what string
		switch {
		case cur.xids > prev.xids:
			what = gpu.XIDText(s.LastXID)
		case cur.ecc > prev.ecc:
			what = fmt.Sprintf("%d uncorrectable ECC error(s)", cur.ecc-prev.ecc)
		default:
			continue
		}
		f := GPUFault{Ref: gpu.Ref{Node: node, Index: s.Index}, At: now,
			Reason: fmt.Sprintf("GPU %s/%d reported %s", node, s.Index, what)}
		h.faults[k] = f
		out = append(out, f)
	}
	return out
}

// load adds faults (read from the store) to the GPUs out of service.
// Counters keep their baselines.
func (h *health) load(faults []GPUFault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = make(map[gpu.Ref]gpuErrors)
		h.faults = make(map[gpu.Ref]GPUFault)
	}
	for _, f := range faults {
		h.faults[f.Ref] = f
	}
}

// apply applies what the store changed from old to cur: faults new or
// changed there are taken, and faults gone from it (cleared through
// another replica) are dropped, unless the GPU failed again since. It
// returns the GPUs put back in service.
func (h *health) apply(old, cur []GPUFault) []GPUFault {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = make(map[gpu.Ref]gpuErrors)
		h.faults = make(map[gpu.Ref]GPUFault)
	}
	was := make(map[gpu.Ref]GPUFault, len(old))
	for _, f := range old {
		was[f.Ref] = f
	}
	for _, f := range cur {
		k := f.Ref
		if o, ok := was[k]; !ok || !sameFault(o, f) {
			h.faults[k] = f
		}
		delete(was, k)
	}
	var back []GPUFault
	for k, o := range was {
		// A fault of this engine other than the store's is a new
		// failure, not the one cleared.
		if m, ok := h.faults[k]; ok && sameFault(m, o) {
			delete(h.faults, k)
			back = append(back, m)
		}
	}
	return back
}

// sameFault reports whether a and b are one fault of a GPU, to the
// store's precision (PostgreSQL keeps microseconds).
func sameFault(a, b GPUFault) bool {
	d := a.At.Sub(b.At)
	return a.Reason == b.Reason && d < time.Microsecond && d > -time.Microsecond
}

// fault returns the fault of a GPU, if it has one.
func (h *health) fault(node string, index int) (GPUFault, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.faults[gpu.Ref{Node: node, Index: index}]
	return f, ok
}

// checkHealth reads every connected machine's GPUs and records the ones
// that failed.
func (e *Engine) checkHealth(ctx context.Context, now time.Time) {
	for _, n := range e.Nodes() {
		e.observeNode(ctx, n, now)
	}
}

// observeNode records the GPUs of n that failed since its last reading,
// in memory and in the store, which keeps them out of service across
// restarts. A GPU the store fails to record stays out of service until
// this server stops.
func (e *Engine) observeNode(ctx context.Context, n Node, now time.Time) {
	for _, f := range e.health.observe(n.Name(), n.Sample(now), now) {
		e.cfg.Logger.Warn("GPU taken out of service", "node", f.Node, "gpu", f.Index, "reason", f.Reason)
		if err := e.cfg.Store.RecordGPUFault(ctx, f); err != nil {
			e.cfg.Logger.Error("record GPU out of service", "node", f.Node, "gpu", f.Index, "err", err)
			continue
		}
		e.stored.noteFault(f, true)
	}
}

// gpuUnhealthy reports whether a GPU is out of service.
func (e *Engine) gpuUnhealthy(node string, index int) bool {
	_, ok := e.health.fault(node, index)
	return ok
}

// GPUFaults lists the GPUs out of service, by node and index.
func (e *Engine) GPUFaults() []GPUFault {
	e.health.mu.Lock()
	out := make([]GPUFault, 0, len(e.health.faults))
	for _, f := range e.health.faults {
		out = append(out, f)
	}
	e.health.mu.Unlock()
	sort.Slice(out, func(a, b int) bool {
		if out[a].Node != out[b].Node {
			return out[a].Node < out[b].Node
		}
		return out[a].Index < out[b].Index
	})
	return out
}

// ErrGPUHealthy is returned when clearing a GPU that is not out of
// service.
var ErrGPUHealthy = fmt.Errorf("GPU is not out of service")

// ClearGPUFault puts a GPU back in service, once an admin has looked at
// it, in the store first. Its counters' current readings become its new
// baseline. On a follower it deletes the store's fault only; the leader's
// next pass puts the GPU back in service (nodestate.go).
func (e *Engine) ClearGPUFault(node string, index int) error {
	if e.follower.Load() {
		return e.clearStoredGPUFault(node, index)
	}
	if _, ok := e.health.fault(node, index); !ok {
		return fmt.Errorf("GPU %s/%d: %w", node, index, ErrGPUHealthy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeStateTimeout)
	defer cancel()
	if err := e.cfg.Store.DeleteGPUFault(ctx, node, index); err != nil {
		return fmt.Errorf("put GPU %s/%d back in service: %w", node, index, err)
	}
	e.stored.noteFault(GPUFault{Ref: gpu.Ref{Node: node, Index: index}}, false)
	e.health.mu.Lock()
	delete(e.health.faults, gpu.Ref{Node: node, Index: index})
	e.health.mu.Unlock()
	e.cfg.Logger.Info("GPU back in service", "node", node, "gpu", index)
	e.Wake()
	return nil
}

// requeueIfGPUFailed makes the failed end of a run on node an
// infrastructure failure when one of the GPUs it ran on there failed
// during the run: the job waits again, and the run does not count against
// its retries. It reports whether it did.
func (e *Engine) requeueIfGPUFailed(ctx context.Context, node string, code int, r *run, now time.Time) bool {
	if r.stop != "" || code == 0 {
		return false
	}
	// The machine's latest readings: the failure may have come after the
	// last pass.
	if n := e.node(node); n != nil {
		e.observeNode(ctx, n, now)
	}
	gpus := r.gpus[node]
	if gpus == nil {
		// Adopted after a reconnect from an agent that does not report
		// its runs' GPUs (adopt.go): any of the machine's counts.
		if n := e.node(node); n != nil {
			for _, d := range n.Devices() {
				gpus = append(gpus, d.Index)
			}
		}
	}
	for _, g := range gpus {
		f, ok := e.health.fault(node, g)
		if !ok || f.At.Before(r.started) {
			continue
		}
		r.stop, r.reason = job.Queued, "requeued: "+f.Reason
		e.stats.requeued(RequeueGPUFault)
		return true
	}
	return false
}
