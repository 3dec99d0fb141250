package slurm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// node is a Slurm node as the engine drives it.
type node struct {
	e    *Executor
	name string
	// Guarded by e.mu.
	devices    []gpu.Device
	cpus       int
	memMiB     int64
	registered bool // the engine has it
}

var (
	_ engine.Node           = (*node)(nil)
	_ engine.ResumeReporter = (*node)(nil)
)

// update takes in what Slurm reports of the node.
func (n *node) update(sn Node, mem GPUMemory) {
	n.cpus, n.memMiB = sn.CPUs, sn.MemMiB
	n.devices = n.devices[:0]
	for _, g := range sn.GPUs {
		model := g.Type
		if model == "" {
			model = "gpu"
		}
		n.devices = append(n.devices, gpu.Device{Index: g.Index, Model: model, MemMiB: mem.For(g.Type)})
	}
}

func (n *node) checkGPUsLocked(gpus []int) error {
	if len(gpus) == 0 {
		return errors.New("no GPUs")
	}
	for i, g := range gpus {
		if g < 0 || g >= len(n.devices) {
			return fmt.Errorf("no GPU %d (the node has %d)", g, len(n.devices))
		}
		if i > 0 && gpus[i-1] == g {
			return fmt.Errorf("GPU %d given twice", g)
		}
	}
	return nil
}

// Name implements engine.Node.
func (n *node) Name() string { return n.name }

// Addr is the address other nodes reach this one at (engine.AddrNode):
// its Slurm name, which Slurm's nodes resolve.
func (n *node) Addr() string { return n.name }

// Devices implements engine.Node: the node's GPUs from its gres, with
// the memory the configuration gives their type.
func (n *node) Devices() []gpu.Device {
	n.e.mu.Lock()
	defer n.e.mu.Unlock()
	return slices.Clone(n.devices)
}

// Resources implements engine.Node: CPUs and RealMemory as Slurm reports
// them.
func (n *node) Resources() (cpus int, memMiB int64) {
	n.e.mu.Lock()
	defer n.e.mu.Unlock()
	return n.cpus, n.memMiB
}

// Start implements engine.Node: it submits the run held and pinned, then
// releases it. Its end is reported later, as an Exit.
func (n *node) Start(ctx context.Context, s job.Spec) error { return n.e.start(ctx, n, s) }

// Stop implements engine.Node: SIGTERM, then a cancel after the grace
// period. The Exit follows.
func (n *node) Stop(ctx context.Context, ref job.RunRef) error { return n.e.stop(ctx, n.name, ref) }

// Running implements engine.Node: the gpuportal runs there that have not
// ended.
func (n *node) Running() []job.RunRef {
	n.e.mu.Lock()
	defer n.e.mu.Unlock()
	var refs []job.RunRef
	for _, r := range n.e.runs {
		ref := job.RunRef{Job: r.jobID, Run: r.run}
		if r.node == n.name && !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	sort.Slice(refs, func(a, b int) bool { return refs[a].Job < refs[b].Job })
	return refs
}

// Resumes implements engine.ResumeReporter: what each run submitted
// here by this server found in its checkpoint folder, by job.
func (n *node) Resumes() map[int64]job.Resume {
	n.e.mu.Lock()
	defer n.e.mu.Unlock()
	out := make(map[int64]job.Resume)
	for _, r := range n.e.runs {
		if r.node == n.name && r.resume.Run > 0 {
			out[r.jobID] = r.resume
		}
	}
	return out
}

// LogPath is where a job's output is, for the portal.
func (n *node) LogPath(jobID int64) string { return n.e.LogPath(jobID) }
