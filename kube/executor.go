// Package kube runs gpuportal's jobs on a Kubernetes cluster (serve
// --executor kubernetes): the cluster's nodes with nvidia.com/gpu become
// engine nodes, and each run the engine starts is a pod created behind a
// scheduling gate, then bound to the node and GPUs gpuportal's own core
// chose. docs/kubernetes.md describes it.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/job"
)

// Registry is the part of the engine that the cluster's nodes join and
// report to. *engine.Engine implements it.
type Registry interface {
	AddNode(ctx context.Context, n engine.Node) error
	RemoveNode(ctx context.Context, name string) error
	MirrorDraining(name string, on bool) error
	NodeStatuses() []engine.NodeStatus
	Exits() chan<- job.Exit
}

// Config sets up an Executor.
type Config struct {
	Core     *Client
	Registry Registry
	// Monitors finds the monitor-only agent of a node, whose GPU
	// readings become the node's; nil: none.
	Monitors engine.Monitors
	Logger   *slog.Logger
	// Namespace holds gpuportal's pods.
	Namespace string
	// Prefix names gpuportal's pods (PREFIX-JOB-RUN-NODE) and labels them
	// (gpuportal.io/instance); one per server sharing a cluster. Default
	// "gpuportal".
	Prefix string
	// NodeSelector limits gpuportal to the nodes it selects (a label
	// selector); empty: every node with nvidia.com/gpu.
	NodeSelector string
	// Image is the container image of jobs that name none.
	Image string
	// GPUMemMiB is the memory of a GPU whose node has no
	// nvidia.com/gpu.memory label (GPU feature discovery's).
	GPUMemMiB int64
	// Grace is the pods' termination grace period: SIGTERM, then SIGKILL.
	Grace time.Duration
	// StartTimeout bounds the wait of a gated pod for its GPUs to be
	// free of the pods being deleted; then its run fails.
	StartTimeout time.Duration
	// Poll is the longest time between two loops over the mirrored
	// state; each change wakes the loop sooner. Default 1s.
	Poll time.Duration
	Now  func() time.Time
	// LogDir is where the server keeps its copy of the jobs' output,
	// read from the pod log API (logs.go); empty: none is kept.
	LogDir string
	// LogCore reads the pods' output: a client of its own, so that
	// following output takes nothing from the rate of creates and binds
	// (--kube-qps). nil: Core.
	LogCore *Client
	// DialPod connects to port of pod (a session's server) through the
	// API server's pods/portforward (session.go); nil: sessions are
	// refused.
	DialPod func(ctx context.Context, pod string, port int) (net.Conn, error)
	// CheckpointClaim is a PersistentVolumeClaim in Namespace whose
	// folder job-ID every pod of job ID mounts at CheckpointMount
	// (GPUPORTAL_CHECKPOINT_DIR), kept across its runs: ReadWriteMany
	// (NFS, CephFS), so that a run resumes on any node. Empty: the pods
	// have no checkpoint folder.
	CheckpointClaim string
	// CheckpointDir is where this server sees the claim's volume. It is
	// required with the claim: the server makes each job's folder there
	// before its first pod (writable by the job's container), and reads it as each run starts to tell the run what it
	// resumes from, as agents do (GPUPORTAL_RESUME; the job's resumes).
	CheckpointDir string
	// RunDir keeps the record of each job's runs (agent.BeginResume);
	// default: CheckpointDir/.runs.
	RunDir string
	// RunAsUID and RunAsGID are the user and group the jobs' containers
	// run as (--kube-run-as), whatever their images say: never root, which
	// the pods also ask the kubelet to refuse (runAsNonRoot). 0:
	// DefaultRunAs.
	RunAsUID, RunAsGID int64
}

// DefaultRunAs is the UID and GID of the jobs' containers where the
// executor's configuration names none.
const DefaultRunAs = 1000

// CheckpointMount is where a pod finds its job's checkpoint folder
// (Config.CheckpointClaim).
const CheckpointMount = "/gpuportal/checkpoint"

// Executor makes the GPU nodes of a Kubernetes cluster engine nodes and
// runs the engine's jobs there as pods. Create it with New, then Run.
type Executor struct {
	cfg    Config
	log    *slog.Logger
	wake   chan struct{}
	ctx    context.Context // Run's, for work that outlives a call
	nodeLS labels.Selector

	mu sync.Mutex
	// Mirrors of the API server's objects (mirror.go).
	kubeNodes     map[string]*corev1.Node
	pods          map[string]*corev1.Pod // gpuportal's, by name
	gone          map[string]*corev1.Pod // deleted since the last loop
	foreign       map[string]foreignPod  // other schedulers' holding GPUs, by namespace/name
	nodesListed   bool
	podsListed    bool
	foreignListed bool
	// What gpuportal makes of them.
	nodes   map[string]*node // the nodes in scope at the last loop
	runs    map[string]*run  // by pod name, until the engine is told they ended
	drained map[string]bool  // nodes gpuportal drains because they are cordoned
	// draining are the ended pods kept until their output is read.
	draining map[string]types.UID
	adopted  bool
	// The copies of the pods' output (logs.go): by pod name, and the one
	// that writes each file.
	logs     map[string]*logCopy
	logOwner map[string]*logCopy
}

// run is the part of one run of a gpuportal job on one node: one pod.
type run struct {
	pod     string
	uid     types.UID
	jobID   int64
	run     int64
	node    string
	gpus    []int
	parts   int       // the run's pods, one per machine: more than 1 for a gang
	shared  bool      // the scheduler shares its GPUs with other jobs
	created time.Time // when gpuportal created or adopted it
	seen    bool      // the mirror has had it
	// released is when its gate was removed and it was bound; zero while
	// gated. releasing: a release is under way.
	released  time.Time
	releasing bool
	running   bool
	stopping  bool // gpuportal deletes it
	// deleteAsked is when gpuportal last asked for its deletion.
	deleteAsked time.Time
	failure     string // why gpuportal ended it on its own
	// resume is what the run found in its checkpoint folder as its pod
	// was made (Config.CheckpointClaim); zero without one.
	resume job.Resume
}

// New returns an executor for cfg.
func New(cfg Config) (*Executor, error) {
	if cfg.Core == nil || cfg.Registry == nil {
		return nil, errors.New("kubernetes executor: a client and a registry are required")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("kubernetes executor: --kube-namespace is empty")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "gpuportal"
	}
	if v := labelValue(cfg.Prefix); v != cfg.Prefix || strings.ContainsAny(cfg.Prefix, "_.") || strings.ToLower(cfg.Prefix) != cfg.Prefix {
		return nil, fmt.Errorf("kubernetes executor: --kube-prefix %q: lower-case letters, digits and '-' only", cfg.Prefix)
	}
	ls, err := labels.Parse(cfg.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("kubernetes executor: --kube-node-selector %q: %w", cfg.NodeSelector, err)
	}
	if cfg.Image == "" {
		return nil, errors.New("kubernetes executor: --kube-image is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.GPUMemMiB <= 0 {
		cfg.GPUMemMiB = 80 * 1024
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.RunAsUID < 0 || cfg.RunAsGID < 0 {
		return nil, fmt.Errorf("kubernetes executor: --kube-run-as %d:%d: want a UID and a GID", cfg.RunAsUID, cfg.RunAsGID)
	}
	if cfg.CheckpointClaim != "" || cfg.CheckpointDir != "" {
		if err := checkCheckpoints(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Executor{
		cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), ctx: context.Background(), nodeLS: ls,
		kubeNodes: make(map[string]*corev1.Node), pods: make(map[string]*corev1.Pod), gone: make(map[string]*corev1.Pod),
		foreign: make(map[string]foreignPod), nodes: make(map[string]*node), runs: make(map[string]*run), drained: make(map[string]bool),
		draining: make(map[string]types.UID), logs: make(map[string]*logCopy), logOwner: make(map[string]*logCopy),
	}, nil
}

// ours reports whether p is one of this executor's pods.
func (e *Executor) ours(p *corev1.Pod) bool {
	return p.Namespace == e.cfg.Namespace && p.Labels[LabelManagedBy] == managedBy && p.Labels[LabelInstance] == e.cfg.Prefix
}

// kick wakes the loop.
func (e *Executor) kick() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run follows the cluster's nodes and pods until ctx ends, and acts on
// each change: it adds, drains and removes nodes, releases gated pods,
// and reports the end of each run to the engine. Pods keep running when
// it returns; the next Run adopts them.
func (e *Executor) Run(ctx context.Context) {
	e.mu.Lock()
	e.ctx = ctx
	e.mu.Unlock()
	core, ns := e.cfg.Core, e.cfg.Namespace
	ownLS := labels.Set{LabelManagedBy: managedBy, LabelInstance: e.cfg.Prefix}.String()
	go follow(ctx, e.log, listWatch{what: "nodes",
		list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
			o.LabelSelector = e.cfg.NodeSelector
			l, err := core.Nodes().List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			objs := make([]runtime.Object, len(l.Items))
			for i := range l.Items {
				objs[i] = &l.Items[i]
			}
			return objs, l.ResourceVersion, nil
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = e.cfg.NodeSelector
			return core.Nodes().Watch(ctx, o)
		},
	}, nodeMirror{e})
	go follow(ctx, e.log, listWatch{what: "gpuportal's pods",
		list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
			o.LabelSelector = ownLS
			return listPods(ctx, core.Pods(ns), o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = ownLS
			return core.Pods(ns).Watch(ctx, o)
		},
	}, podMirror{e})
	// Other schedulers' pods on nodes, which hold GPUs gpuportal must not
	// give; ended pods hold none.
	const placed = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
	go follow(ctx, e.log, listWatch{what: "other pods on nodes",
		list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
			o.FieldSelector = placed
			return listPods(ctx, core.Pods(""), o)
		},
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = placed
			return core.Pods("").Watch(ctx, o)
		},
	}, foreignMirror{e})

	tick := time.NewTicker(e.cfg.Poll)
	defer tick.Stop()
	for {
		e.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.wake:
		}
	}
}

func listPods(ctx context.Context, pods Pods, o metav1.ListOptions) ([]runtime.Object, string, error) {
	l, err := pods.List(ctx, o)
	if err != nil {
		return nil, "", err
	}
	objs := make([]runtime.Object, len(l.Items))
	for i := range l.Items {
		objs[i] = &l.Items[i]
	}
	return objs, l.ResourceVersion, nil
}

// Sync acts once on the mirrored state, as Run does on each change: once
// everything has been listed, it adopts the pods of an earlier server,
// then updates the nodes and the runs.
func (e *Executor) Sync(ctx context.Context) {
	e.mu.Lock()
	if !e.nodesListed || !e.podsListed || !e.foreignListed {
		e.mu.Unlock()
		return
	}
	var stale []string
	if !e.adopted {
		e.adopted = true
		stale = e.adoptLocked()
	}
	e.mu.Unlock()
	for _, name := range stale {
		e.log.Warn("deleting a gated pod left by an earlier server", "pod", name)
		e.deletePod(ctx, name, 0)
	}
	e.syncNodes(ctx)
	e.syncRuns(ctx)
}

// adoptLocked takes over the pods of an earlier server: bound ones are
// its runs again (the engine adopts them when their node joins, and
// those that ended are reported), and gated ones, created but never
// released, are returned to be deleted.
func (e *Executor) adoptLocked() (stale []string) {
	now := e.cfg.Now()
	for name, p := range e.pods {
		if _, ok := e.runs[name]; ok {
			continue
		}
		if gated(p) || p.Spec.NodeName == "" {
			stale = append(stale, name)
			continue
		}
		jobID, err1 := strconv.ParseInt(p.Labels[LabelJob], 10, 64)
		runN, err2 := strconv.ParseInt(p.Labels[LabelRun], 10, 64)
		gpus, err3 := parseIndexList(p.Annotations[AnnotationGPUs])
		if err := errors.Join(err1, err2, err3); err != nil || jobID <= 0 {
			e.log.Warn("a pod of gpuportal's without its job, run or GPUs: left alone", "pod", name, "err", err)
			continue
		}
		parts, _ := strconv.Atoi(p.Annotations[AnnotationParts])
		e.runs[name] = &run{pod: name, uid: p.UID, jobID: jobID, run: runN, node: p.Spec.NodeName, gpus: gpus, parts: max(parts, 1),
			created: now, seen: true, released: now, running: p.Status.Phase == corev1.PodRunning}
		e.log.Info("adopted a pod", "job", jobID, "run", runN, "pod", name, "node", p.Spec.NodeName, "phase", p.Status.Phase)
	}
	return stale
}

// syncNodes adds the GPU nodes that are Ready, removes those that are
// lost (NotReady, gone, no GPUs), and drains in gpuportal those that are
// cordoned.
func (e *Executor) syncNodes(ctx context.Context) {
	var add []*node
	var remove []string
	draining := make(map[string]bool)
	e.mu.Lock()
	foreign := make(map[string]int)
	for _, f := range e.foreign {
		foreign[f.node] += int(f.gpus)
	}
	seen := make(map[string]bool)
	for name, kn := range e.kubeNodes {
		if !e.nodeLS.Matches(labels.Set(kn.Labels)) {
			continue
		}
		st := readNode(kn, e.cfg.GPUMemMiB)
		if st.gpus == 0 {
			continue
		}
		seen[name] = true
		n := e.nodes[name]
		if n == nil {
			n = &node{e: e, name: name}
			e.nodes[name] = n
		}
		n.updateLocked(st, foreign[name], e.heldLocked(name))
		switch {
		case !st.ready && n.registered:
			e.log.Warn("node not ready: its runs are requeued unless it returns in time", "node", name, "why", st.notReady)
			n.registered = false
			remove = append(remove, name)
		case st.ready && !n.registered:
			n.registered = true
			add = append(add, n)
		}
		if n.registered {
			draining[name] = st.cordoned
		}
	}
	for name, n := range e.nodes {
		if !seen[name] {
			if n.registered {
				e.log.Warn("node left the cluster or has no GPUs", "node", name)
				remove = append(remove, name)
			}
			delete(e.nodes, name)
		}
	}
	e.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	for _, name := range remove {
		if err := e.cfg.Registry.RemoveNode(ctx, name); err != nil {
			e.log.Error("remove a node", "node", name, "err", err)
		}
	}
	for _, n := range add {
		if err := e.cfg.Registry.AddNode(ctx, n); err != nil {
			e.log.Error("add a node", "node", n.name, "err", err)
			e.mu.Lock()
			n.registered = false
			e.mu.Unlock()
			delete(draining, n.name)
			continue
		}
		e.log.Info("node joined", "node", n.name, "gpus", len(n.Devices()))
	}
	e.syncDrains(draining)
}

// heldLocked are the GPUs gpuportal's runs hold on node.
func (e *Executor) heldLocked(node string) map[int]bool {
	held := make(map[int]bool)
	for _, r := range e.runs {
		if r.node == node {
			for _, g := range r.gpus {
				held[g] = true
			}
		}
	}
	return held
}

// syncDrains drains in gpuportal the nodes that are cordoned, and resumes
// them when they are uncordoned. A node an admin drained in gpuportal
// stays drained.
func (e *Executor) syncDrains(draining map[string]bool) {
	var already map[string]bool
	for name, on := range draining {
		e.mu.Lock()
		ours := e.drained[name]
		e.mu.Unlock()
		if on == ours {
			continue
		}
		if on && already == nil {
			already = make(map[string]bool)
			for _, st := range e.cfg.Registry.NodeStatuses() {
				already[st.Name] = st.Draining
			}
		}
		if on && already[name] {
			continue
		}
		if err := e.cfg.Registry.MirrorDraining(name, on); err != nil {
			e.log.Error("drain a node as it is cordoned", "node", name, "drain", on, "err", err)
			continue
		}
		e.mu.Lock()
		if on {
			e.drained[name] = true
		} else {
			delete(e.drained, name)
		}
		e.mu.Unlock()
		if on {
			e.log.Info("node cordoned: no new jobs there", "node", name)
		} else {
			e.log.Info("node uncordoned", "node", name)
		}
	}
}

// syncRuns reports the runs whose pods ended or are gone, deletes the
// pods that will never run, releases the gated pods whose GPUs are free,
// and fails those that waited too long.
func (e *Executor) syncRuns(ctx context.Context) {
	now := e.cfg.Now()
	var exits []job.Exit
	type releasing struct {
		r    *run
		last *corev1.Pod
	}
	var release []releasing
	type deletion struct {
		pod   string
		grace time.Duration
	}
	var deletes []deletion
	e.mu.Lock()
	gone := e.gone
	e.gone = make(map[string]*corev1.Pod)
	for name, r := range e.runs {
		p := e.pods[name]
		if p != nil && r.uid != "" && p.UID != r.uid {
			p = nil // another pod of the same name: this one is gone
		}
		if p == nil {
			last := gone[name]
			if last != nil && r.uid != "" && last.UID != r.uid {
				last = nil
			}
			if !r.seen && last == nil && now.Sub(r.created) < time.Minute {
				continue // created, not yet mirrored
			}
			delete(e.runs, name)
			e.syncLogLocked(r, nil, now)
			if ex, ok := e.exitLocked(r, last, now); ok {
				exits = append(exits, ex)
			}
			continue
		}
		r.seen, r.uid = true, p.UID
		keep := e.syncLogLocked(r, p, now)
		switch {
		case terminal(p):
			delete(e.runs, name)
			if ex, ok := e.exitLocked(r, p, now); ok {
				exits = append(exits, ex)
			}
			if p.DeletionTimestamp == nil {
				if keep {
					// Deleted once its output is read to the end.
					e.draining[name] = p.UID
				} else {
					deletes = append(deletes, deletion{name, 0})
				}
			}
		case p.DeletionTimestamp != nil:
			// Being deleted: its end is reported once it is gone.
		case r.stopping || r.failure != "":
			// To be deleted: a deletion that failed (the API server was
			// away) is tried again.
			if now.Sub(r.deleteAsked) >= 5*time.Second {
				grace := e.cfg.Grace
				if r.released.IsZero() || gated(p) {
					grace = 0
				}
				r.deleteAsked = now
				deletes = append(deletes, deletion{name, grace})
			}
		case r.failure == "" && stuck(p) != "":
			r.failure, r.deleteAsked = stuck(p), now
			deletes = append(deletes, deletion{name, time.Second})
		case p.Status.Phase == corev1.PodRunning:
			r.running = true
		case r.released.IsZero() && !r.releasing && !r.stopping && r.failure == "":
			if now.Sub(r.created) > e.cfg.StartTimeout {
				r.failure, r.deleteAsked = fmt.Sprintf("its GPUs were not free within %s", e.cfg.StartTimeout), now
				deletes = append(deletes, deletion{name, 0})
			} else {
				for _, part := range e.releasableLocked(r) {
					part.releasing = true
					last := e.pods[part.pod]
					if last != nil && last.UID != part.uid {
						last = nil
					}
					release = append(release, releasing{part, last})
				}
			}
		}
	}
	// Ended pods kept for the end of their output: deleted once it is
	// read (or logDrain has passed).
	for name, uid := range e.draining {
		p := e.pods[name]
		if p == nil || p.UID != uid || p.DeletionTimestamp != nil {
			delete(e.draining, name)
			continue
		}
		if c := e.logs[name]; c == nil || c.uid != uid || c.done || now.Sub(c.endedAt) >= logDrain {
			delete(e.draining, name)
			deletes = append(deletes, deletion{name, 0})
		}
	}
	for name, c := range e.logs {
		if _, running := e.runs[name]; c.done && !running && e.draining[name] == "" {
			delete(e.logs, name)
		}
	}
	// Pods no run owns (a create whose answer was lost, an ended pod
	// whose deletion failed) are deleted once they are a minute old.
	for name, p := range e.pods {
		if _, ok := e.runs[name]; !ok && e.draining[name] == "" && p.DeletionTimestamp == nil && now.Sub(p.CreationTimestamp.Time) > time.Minute {
			grace := e.cfg.Grace
			if gated(p) || terminal(p) {
				grace = 0
			}
			deletes = append(deletes, deletion{name, grace})
		}
	}
	e.mu.Unlock()
	for _, d := range deletes {
		e.deletePod(ctx, d.pod, d.grace)
	}
	for _, rel := range release {
		e.release(ctx, rel.r, rel.last)
	}
	for _, ex := range exits {
		select {
		case e.cfg.Registry.Exits() <- ex:
		case <-ctx.Done():
			return
		}
	}
}

// releasableLocked are the pods of r's run to release now: r's alone
// once its GPUs are free; for a gang, every part not yet released, and
// only once the pods of all its parts exist, none stopping, and each is
// released or has its GPUs free. A gang's pods are thus bound all or
// none: none before the last is created.
func (e *Executor) releasableLocked(r *run) []*run {
	if r.parts <= 1 {
		if e.freeLocked(r) {
			return []*run{r}
		}
		return nil
	}
	var parts, out []*run
	for _, o := range e.runs {
		if o.jobID != r.jobID || o.run != r.run {
			continue
		}
		if o.stopping || o.failure != "" {
			return nil
		}
		parts = append(parts, o)
		if !o.released.IsZero() || o.releasing {
			continue
		}
		if !e.freeLocked(o) {
			return nil
		}
		out = append(out, o)
	}
	if len(parts) != r.parts {
		return nil
	}
	return out
}

// freeLocked reports whether no other pod of gpuportal's holds a GPU of
// r's: every other run on its node that shares a GPU with it is gated
// still, or both share their GPUs by the scheduler's choice.
func (e *Executor) freeLocked(r *run) bool {
	for _, o := range e.runs {
		if o == r || o.node != r.node || (o.released.IsZero() && !o.releasing) {
			continue
		}
		if o.shared && r.shared && !o.stopping {
			continue
		}
		for _, g := range o.gpus {
			if slices.Contains(r.gpus, g) {
				return false
			}
		}
	}
	return true
}

// exitLocked is how run r ended, from its pod's last state (nil: none
// seen); not ok when nobody is to be told: its node left the engine,
// which has requeued or will requeue the job.
func (e *Executor) exitLocked(r *run, last *corev1.Pod, now time.Time) (job.Exit, bool) {
	ex := job.Exit{Node: r.node, JobID: r.jobID, Run: r.run, At: now}
	switch {
	case r.failure != "":
		ex.ExitCode, ex.Err = -1, r.failure
	case last != nil && terminal(last):
		end := podEnding(last)
		ex.ExitCode, ex.Err, ex.Infra, ex.EndedAs = end.code, end.why, end.infra, end.endedAs
		if t := finishedAt(last); !t.IsZero() && t.Before(now) {
			ex.At = t
		}
	case r.stopping:
		ex.ExitCode, ex.Err = -1, "stopped: its pod was deleted"
	case last != nil:
		// Deleted by someone else (kubectl delete, the node's eviction):
		// a cancel, as an administrator's scancel is on Slurm.
		ex.ExitCode, ex.Err, ex.EndedAs = -1, "its pod was deleted in Kubernetes", job.Cancelled
	default:
		ex.ExitCode, ex.Err, ex.Infra = -1, "its pod vanished from the API server", true
	}
	if n := e.nodes[r.node]; n == nil || !n.registered {
		e.log.Info("run ended on a node gpuportal lost", "job", r.jobID, "pod", r.pod, "node", r.node)
		return ex, false
	}
	e.log.Debug("run ended", "job", r.jobID, "run", r.run, "pod", r.pod, "node", r.node, "exit_code", ex.ExitCode, "err", ex.Err)
	return ex, true
}

// finishedAt is when pod's container ended, zero when unknown.
func finishedAt(p *corev1.Pod) time.Time {
	if st := containerState(p); st != nil && st.Terminated != nil {
		return st.Terminated.FinishedAt.Time
	}
	return time.Time{}
}

// unavailableError is a start the API server refused or could not be
// asked: not the job's fault, so the engine queues it again (it matches
// job.ErrDisconnected).
type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, job.ErrDisconnected} }

// start creates the gated pod of run s on node n, then releases it at
// once if its GPUs are free; otherwise the loop releases it once the pods
// still holding them are gone. Pods of earlier runs holding its GPUs are
// stale (the engine gave their GPUs away) and are deleted first.
func (e *Executor) start(ctx context.Context, n *node, s job.Spec) error {
	if s.Session != nil {
		if e.cfg.DialPod == nil {
			return fmt.Errorf("start job %d on %s: interactive sessions cannot be reached on this cluster", s.JobID, n.name)
		}
		if s.Gang != nil {
			return fmt.Errorf("start job %d on %s: a session runs on one machine", s.JobID, n.name)
		}
		if _, _, _, err := sessionPod(s); err != nil {
			return fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, err)
		}
	}
	if s.Gang != nil && s.Gang.TasksPerGPU {
		return fmt.Errorf("start job %d on %s: jobs with a process per GPU do not run on Kubernetes yet (they need gpuportal agents)", s.JobID, n.name)
	}
	if s.Gang != nil {
		if err := s.Gang.Check(); err != nil {
			return fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, err)
		}
	}
	gpus := slices.Clone(s.GPUs)
	slices.Sort(gpus)
	e.mu.Lock()
	if err := n.checkGPUsLocked(gpus); err != nil {
		e.mu.Unlock()
		return fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, err)
	}
	type stalePod struct {
		name  string
		grace time.Duration
	}
	var stale []stalePod
	for name, r := range e.runs {
		if r.node != n.name || r.stopping {
			continue
		}
		overlaps := slices.ContainsFunc(r.gpus, func(g int) bool { return slices.Contains(gpus, g) })
		if r.jobID == s.JobID || (overlaps && !(r.shared && s.Sharing != nil)) {
			r.stopping, r.deleteAsked = true, e.cfg.Now()
			if r.failure == "" {
				r.failure = fmt.Sprintf("stale: its GPUs were given to run %d of job %d", s.Run, s.JobID)
			}
			grace := e.cfg.Grace
			if r.released.IsZero() && !r.releasing {
				grace = 0 // never ran
			}
			stale = append(stale, stalePod{name, grace})
		}
	}
	e.mu.Unlock()
	for _, sp := range stale {
		e.log.Warn("deleting a stale pod before its GPUs go to another run", "pod", sp.name, "job", s.JobID, "node", n.name)
		e.deletePod(ctx, sp.name, sp.grace)
	}

	env := jobEnv(s, gpus, e.cfg.Prefix, e.cfg.Namespace)
	var resume job.Resume
	if e.cfg.CheckpointClaim != "" {
		res, resEnv, err := e.beginRun(s)
		if err != nil {
			// As agents do: the run starts, told of no checkpoint.
			e.log.Warn("job's checkpoint folder not looked at: it starts without GPUPORTAL_RESUME", "job", s.JobID, "run", s.Run, "err", err)
		}
		resume = res
		env = append(env, "GPUPORTAL_CHECKPOINT_DIR="+CheckpointMount)
		env = append(env, resEnv...)
	}
	pod := newPod(podSpec{prefix: e.cfg.Prefix, namespace: e.cfg.Namespace, image: e.cfg.Image, node: n.name,
		team: s.Team, grace: e.cfg.Grace, env: env, checkpointClaim: e.cfg.CheckpointClaim,
		uid: e.cfg.RunAsUID, gid: e.cfg.RunAsGID}, s, gpus)
	created, err := e.cfg.Core.Pods(e.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return fmt.Errorf("start job %d on %s: create pod %s: %w", s.JobID, n.name, pod.Name, err)
		}
		return unavailableError{fmt.Errorf("start job %d on %s: create pod %s: %w", s.JobID, n.name, pod.Name, err)}
	}
	r := &run{pod: created.Name, uid: created.UID, jobID: s.JobID, run: s.Run, node: n.name, gpus: gpus, parts: 1,
		shared: s.Sharing != nil, created: e.cfg.Now(), resume: resume}
	if s.Gang != nil {
		r.parts = len(s.Gang.Nodes)
	}
	e.mu.Lock()
	e.runs[r.pod] = r
	release := e.releasableLocked(r)
	for _, part := range release {
		part.releasing = true
	}
	e.mu.Unlock()
	switch {
	case len(release) > 0:
		e.releaseAll(ctx, release, r, created)
	case r.parts > 1:
		e.log.Info("pod waits for the other parts of its gang", "job", s.JobID, "pod", r.pod, "node", n.name, "parts", r.parts)
	default:
		e.log.Info("pod waits for its GPUs to be free", "job", s.JobID, "pod", r.pod, "node", n.name, "gpus", gpus)
	}
	return nil
}

// releaseAll releases the pods of runs, created the one of r last seen
// as created: a gang's parts one after another (Kubernetes binds pods
// one at a time).
func (e *Executor) releaseAll(ctx context.Context, runs []*run, r *run, created *corev1.Pod) {
	for _, part := range runs {
		var last *corev1.Pod
		if part == r {
			last = created
		}
		e.release(ctx, part, last)
	}
}

// release pins r's pod to its node (a required node affinity on the
// gated pod), removes the gate, and binds it there, as a scheduler
// would: the pod's node is gpuportal's choice whether a scheduler or
// gpuportal binds it. A pod that cannot be released is deleted and its
// run fails.
func (e *Executor) release(ctx context.Context, r *run, last *corev1.Pod) {
	pods := e.cfg.Core.Pods(e.cfg.Namespace)
	err := e.ungate(ctx, r, last)
	if err == nil {
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: r.pod, UID: r.uid},
			Target: corev1.ObjectReference{Kind: "Node", Name: r.node}}
		err = pods.Bind(ctx, b, metav1.CreateOptions{})
		if apierrors.IsConflict(err) {
			// Bound already: by a scheduler, to the only node the
			// affinity allows.
			var p *corev1.Pod
			if p, err = pods.Get(ctx, r.pod, metav1.GetOptions{}); err == nil && p.Spec.NodeName != r.node {
				err = fmt.Errorf("bound to %s instead", p.Spec.NodeName)
			}
		}
	}
	retry := err != nil && transient(err)
	e.mu.Lock()
	r.releasing = false
	switch {
	case err == nil:
		r.released = e.cfg.Now()
	case retry:
		// The API server is away or overloaded: the loop tries again
		// (within --kube-start-timeout); the pod stays unbound meanwhile.
	case r.failure == "":
		r.failure, r.deleteAsked = fmt.Sprintf("could not bind its pod to %s: %v", r.node, err), e.cfg.Now()
	}
	e.mu.Unlock()
	if retry {
		e.log.Warn("release a pod: trying again", "pod", r.pod, "node", r.node, "err", err)
		return
	}
	if err != nil {
		e.log.Error("release a pod", "pod", r.pod, "node", r.node, "err", err)
		e.deletePod(context.WithoutCancel(ctx), r.pod, time.Second)
		return
	}
	e.log.Info("pod bound", "job", r.jobID, "run", r.run, "pod", r.pod, "node", r.node, "gpus", r.gpus)
}

// transient reports whether err is the API server's being away, busy or
// slow rather than a refusal: the request may succeed if made again.
func transient(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return !errors.Is(err, context.Canceled) // a connection refused or reset
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
}

// ungate sets the node affinity of r's gated pod and removes its gate in
// one update, from p as last seen (nil: read it), retried when the pod
// changed meanwhile.
func (e *Executor) ungate(ctx context.Context, r *run, p *corev1.Pod) error {
	pods := e.cfg.Core.Pods(e.cfg.Namespace)
	for try := 0; ; try++ {
		if p == nil {
			var err error
			if p, err = pods.Get(ctx, r.pod, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("read pod %s: %w", r.pod, err)
			}
		} else {
			p = p.DeepCopy()
		}
		if p.UID != r.uid {
			return fmt.Errorf("pod %s was replaced", r.pod)
		}
		if !gated(p) {
			return nil
		}
		p.Spec.Affinity = pinAffinity(r.node)
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == Gate })
		_, err := pods.Update(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		p = nil // changed meanwhile: read it again
		if !apierrors.IsConflict(err) || try >= 5 {
			return fmt.Errorf("remove the gate of pod %s: %w", r.pod, err)
		}
	}
}

// deletePod deletes a pod of gpuportal's with grace; an error is logged:
// the loop tries again while the run lasts.
func (e *Executor) deletePod(ctx context.Context, name string, grace time.Duration) {
	secs := int64(grace.Seconds())
	err := e.cfg.Core.Pods(e.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	if err != nil && !apierrors.IsNotFound(err) {
		e.log.Warn("delete a pod", "pod", name, "err", err)
	}
}

// stop asks the run ref on node to end: its pod is deleted with the
// grace period (SIGTERM, then SIGKILL from the kubelet), at once if it
// was never released. The Exit follows when the pod is gone.
func (e *Executor) stop(ctx context.Context, nodeName string, ref job.RunRef) error {
	e.mu.Lock()
	var r *run
	for _, x := range e.runs {
		if x.jobID == ref.Job && x.run == ref.Run && x.node == nodeName {
			r = x
		}
	}
	if r == nil {
		e.mu.Unlock()
		return nil // ended already
	}
	r.stopping, r.deleteAsked = true, e.cfg.Now()
	grace := e.cfg.Grace
	if r.released.IsZero() && !r.releasing {
		grace = 0
	}
	name := r.pod
	e.mu.Unlock()
	secs := int64(grace.Seconds())
	err := e.cfg.Core.Pods(e.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("stop job %d on %s: delete pod %s: %w", ref.Job, nodeName, name, err)
	}
	return nil
}

// jobEnv is the environment of run s's container: the job's own
// variables (names checked at submission and again here), then
// gpuportal's, with NVIDIA_VISIBLE_DEVICES naming the GPUs gpuportal
// chose (the NVIDIA container runtime exposes those), and for a gang the
// rendezvous (docs/multinode.md) with each machine's address its pod's
// DNS name (gangAddrs).
func jobEnv(s job.Spec, gpus []int, prefix, namespace string) []string {
	var env []string
	for _, kv := range s.Env {
		name, _, _ := strings.Cut(kv, "=")
		if job.CheckEnvName(name) != nil || name == "NVIDIA_VISIBLE_DEVICES" || name == "CUDA_VISIBLE_DEVICES" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"NVIDIA_VISIBLE_DEVICES="+joinInts(gpus),
		"GPUPORTAL_JOB_ID="+strconv.FormatInt(s.JobID, 10),
		"GPUPORTAL_RUN="+strconv.FormatInt(s.Run, 10),
		"GPUPORTAL_GPUS="+joinInts(gpus),
	)
	if s.Name != "" {
		env = append(env, "GPUPORTAL_JOB_NAME="+s.Name)
	}
	if g := gangAddrs(s, prefix, namespace); g != nil {
		env = append(env, g.Env(HostfilePath)...)
	}
	env = append(env, s.Resources.Env(s.Gang.Tasks())...) // what the pod requests (newPod)
	return append(env, s.Array.Env()...)
}

// checkCheckpoints checks the checkpoint claim of cfg and the folder
// where this server sees it, and sets the record of runs' default.
func checkCheckpoints(cfg *Config) error {
	if cfg.CheckpointClaim == "" {
		return errors.New("kubernetes executor: --kube-checkpoint-dir without --kube-checkpoint-claim: the pods would not mount it")
	}
	if msgs := validation.IsDNS1123Subdomain(cfg.CheckpointClaim); len(msgs) > 0 {
		return fmt.Errorf("kubernetes executor: --kube-checkpoint-claim %q: %s", cfg.CheckpointClaim, strings.Join(msgs, "; "))
	}
	if cfg.CheckpointDir == "" {
		return errors.New("kubernetes executor: --kube-checkpoint-claim needs --kube-checkpoint-dir, where this server sees the claim's volume: it makes each job's folder there")
	}
	if !filepath.IsAbs(cfg.CheckpointDir) {
		return fmt.Errorf("kubernetes executor: --kube-checkpoint-dir %q: want an absolute path", cfg.CheckpointDir)
	}
	if st, err := os.Stat(cfg.CheckpointDir); err != nil || !st.IsDir() {
		return fmt.Errorf("kubernetes executor: --kube-checkpoint-dir %q: not a folder this server can read (the claim's volume mounted here)", cfg.CheckpointDir)
	}
	if cfg.RunDir == "" {
		cfg.RunDir = filepath.Join(cfg.CheckpointDir, ".runs")
	}
	return nil
}

// checkpointFolder is job jobID's checkpoint folder as this server sees
// it: the claim's subPath its pods mount.
func (e *Executor) checkpointFolder(jobID int64) string {
	return filepath.Join(e.cfg.CheckpointDir, checkpointSubPath(jobID))
}

// checkpointSubPath is job jobID's folder in the checkpoint claim.
func checkpointSubPath(jobID int64) string { return "job-" + strconv.FormatInt(jobID, 10) }

// beginRun makes the checkpoint folder of run s's job, writable by its
// container's user (the server, not root, cannot give it to RunAsUID;
// the pods mount only their job's folder of the volume), and looks in it
// as agents do
// (agent.BeginResume): what the run resumes from, and the variables that
// tell it so. A simulated job (no command) has nothing to resume.
func (e *Executor) beginRun(s job.Spec) (job.Resume, []string, error) {
	dir := e.checkpointFolder(s.JobID)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return job.Resume{}, nil, fmt.Errorf("checkpoint folder: %w", err)
	}
	// MkdirAll's mode is cut by the umask; a folder made by an earlier
	// server, or by hand, is set again too.
	if err := os.Chmod(dir, 0o777); err != nil {
		return job.Resume{}, nil, fmt.Errorf("checkpoint folder: %w", err)
	}
	if len(s.Command) == 0 {
		return job.Resume{}, nil, nil
	}
	return agent.BeginResume(dir, filepath.Join(e.cfg.RunDir, strconv.FormatInt(s.JobID, 10)), s.Run, e.cfg.Now())
}
