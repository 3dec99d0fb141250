package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// The labels of NVIDIA's GPU feature discovery that name a node's GPUs.
const (
	labelGPUProduct = "nvidia.com/gpu.product"
	labelGPUMemory  = "nvidia.com/gpu.memory" // MiB
)

// nodeState is what a Node object says of a node.
type nodeState struct {
	gpus     int // allocatable nvidia.com/gpu
	model    string
	gpuMemMi int64
	cpus     int
	memMiB   int64
	ready    bool
	notReady string // why not, when not
	cordoned bool
}

// readNode reads kn: its allocatable GPUs (their model and memory from
// GPU feature discovery's labels, else defaultMemMiB), CPUs and memory,
// whether it is Ready and whether it is cordoned.
func readNode(kn *corev1.Node, defaultMemMiB int64) nodeState {
	st := nodeState{model: "gpu", gpuMemMi: defaultMemMiB, cordoned: kn.Spec.Unschedulable}
	q, ok := kn.Status.Allocatable[ResourceGPU]
	if !ok {
		q = kn.Status.Capacity[ResourceGPU]
	}
	st.gpus = int(max(q.Value(), 0))
	if v := kn.Labels[labelGPUProduct]; v != "" {
		st.model = v
	}
	if v, err := strconv.ParseInt(kn.Labels[labelGPUMemory], 10, 64); err == nil && v > 0 {
		st.gpuMemMi = v
	}
	if c, ok := kn.Status.Allocatable[corev1.ResourceCPU]; ok {
		st.cpus = int(c.MilliValue() / 1000)
	}
	if m, ok := kn.Status.Allocatable[corev1.ResourceMemory]; ok {
		st.memMiB = m.Value() >> 20
	}
	st.notReady = "no Ready condition"
	for _, c := range kn.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		st.ready = c.Status == corev1.ConditionTrue
		st.notReady = ""
		if !st.ready {
			st.notReady = fmt.Sprintf("Ready is %s", c.Status)
			if c.Reason != "" {
				st.notReady += " (" + c.Reason + ")"
			}
		}
	}
	return st
}

// node is a Kubernetes node as the engine drives it.
type node struct {
	e    *Executor
	name string
	// Guarded by e.mu.
	all        int // allocatable GPUs
	devices    []gpu.Device
	cpus       int
	memMiB     int64
	registered bool // the engine has it
}

var _ engine.Node = (*node)(nil)

// updateLocked takes in what the Node object says, with foreign the GPUs
// other schedulers' pods hold there and held those gpuportal's runs
// hold. Kubernetes does not say which GPUs another pod's device plugin
// allocation holds: the highest-numbered GPUs that no run of gpuportal's
// holds are left out, one per GPU they hold.
func (n *node) updateLocked(st nodeState, foreign int, held map[int]bool) {
	n.all, n.cpus, n.memMiB = st.gpus, st.cpus, st.memMiB
	skip := make(map[int]bool)
	for i := st.gpus - 1; i >= 0 && len(skip) < foreign; i-- {
		if !held[i] {
			skip[i] = true
		}
	}
	n.devices = n.devices[:0]
	for i := range st.gpus {
		if !skip[i] {
			n.devices = append(n.devices, gpu.Device{Index: i, Model: st.model, MemMiB: st.gpuMemMi})
		}
	}
}

func (n *node) checkGPUsLocked(gpus []int) error {
	if len(gpus) == 0 {
		return errors.New("no GPUs")
	}
	for i, g := range gpus {
		if g < 0 || g >= n.all {
			return fmt.Errorf("no GPU %d (the node has %d)", g, n.all)
		}
		if i > 0 && gpus[i-1] == g {
			return fmt.Errorf("GPU %d given twice", g)
		}
	}
	return nil
}

// Name implements engine.Node.
func (n *node) Name() string { return n.name }

// Devices implements engine.Node: the node's allocatable nvidia.com/gpu,
// less those other schedulers' pods hold.
func (n *node) Devices() []gpu.Device {
	n.e.mu.Lock()
	defer n.e.mu.Unlock()
	return slices.Clone(n.devices)
}

// Resources implements engine.Node: the node's allocatable CPUs and
// memory.
func (n *node) Resources() (cpus int, memMiB int64) {
	n.e.mu.Lock()
	defer n.e.mu.Unlock()
	return n.cpus, n.memMiB
}

// Start implements engine.Node: it creates the run's pod gated, then
// binds it. Its end is reported later, as an Exit.
func (n *node) Start(ctx context.Context, s job.Spec) error { return n.e.start(ctx, n, s) }

// Stop implements engine.Node: the pod is deleted with its grace period.
// The Exit follows.
func (n *node) Stop(ctx context.Context, ref job.RunRef) error { return n.e.stop(ctx, n.name, ref) }

// Running implements engine.Node: the runs there whose pods have not
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

// Resumes implements engine.ResumeReporter: by job, what the run of each
// there found in its checkpoint folder as its pod was made
// (Config.CheckpointClaim).
func (n *node) Resumes() map[int64]job.Resume {
	n.e.mu.Lock()
	defer n.e.mu.Unlock()
	out := make(map[int64]job.Resume)
	for _, r := range n.e.runs {
		if r.node == n.name && r.resume.Run > 0 && !r.stopping {
			out[r.jobID] = r.resume
		}
	}
	return out
}

// RunGPUs implements engine.RunGPUsReporter: the GPUs the pod of job's
// run there holds, as gpuportal pinned them.
func (n *node) RunGPUs(jobID int64) ([]int, bool) {
	n.e.mu.Lock()
	defer n.e.mu.Unlock()
	for _, r := range n.e.runs {
		if r.node == n.name && r.jobID == jobID && !r.stopping {
			return slices.Clone(r.gpus), true
		}
	}
	return nil, false
}

// LogPath is where the server keeps the output of job jobID's latest
// run (the portal's job page and logs API read it): the copy of its
// pod's output, or its first part's for a gang (logs.go).
func (n *node) LogPath(jobID int64) string { return n.e.LogPath(jobID) }
