package kube

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	corev1 "k8s.io/api/core/v1"
)

// The executor's copies of the cluster's objects, kept by follow. Each
// change wakes the executor's loop.

// nodeMirror keeps the nodes.
type nodeMirror struct{ e *Executor }

func (m nodeMirror) replace(objs []runtime.Object) {
	e := m.e
	e.mu.Lock()
	e.kubeNodes = make(map[string]*corev1.Node, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			e.kubeNodes[n.Name] = n
		}
	}
	e.nodesListed = true
	e.mu.Unlock()
	e.kick()
}

func (m nodeMirror) apply(ev watch.EventType, o runtime.Object) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	e := m.e
	e.mu.Lock()
	if ev == watch.Deleted {
		delete(e.kubeNodes, n.Name)
	} else {
		e.kubeNodes[n.Name] = n
	}
	e.mu.Unlock()
	e.kick()
}

// podMirror keeps gpuportal's own pods, by name.
type podMirror struct{ e *Executor }

func (m podMirror) replace(objs []runtime.Object) {
	e := m.e
	e.mu.Lock()
	e.pods = make(map[string]*corev1.Pod, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && e.ours(p) {
			e.pods[p.Name] = p
		}
	}
	e.podsListed = true
	e.mu.Unlock()
	e.kick()
}

func (m podMirror) apply(ev watch.EventType, o runtime.Object) {
	p, ok := o.(*corev1.Pod)
	if !ok || !m.e.ours(p) {
		return
	}
	e := m.e
	e.mu.Lock()
	if ev == watch.Deleted {
		delete(e.pods, p.Name)
		// A pod may end and be deleted between two loops: its last state
		// is kept until the loop has read it.
		e.gone[p.Name] = p
	} else {
		e.pods[p.Name] = p
	}
	e.mu.Unlock()
	e.kick()
}

// foreignMirror keeps, of the pods of other schedulers (every pod that is
// not gpuportal's) that have not ended, the nvidia.com/gpu each asks for
// on its node.
type foreignMirror struct{ e *Executor }

// foreignPod is a pod of another scheduler holding GPUs on a node.
type foreignPod struct {
	node string
	gpus int64
}

func (m foreignMirror) replace(objs []runtime.Object) {
	e := m.e
	e.mu.Lock()
	e.foreign = make(map[string]foreignPod)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			m.putLocked(p)
		}
	}
	e.foreignListed = true
	e.mu.Unlock()
	e.kick()
}

func (m foreignMirror) apply(ev watch.EventType, o runtime.Object) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	e := m.e
	e.mu.Lock()
	if ev == watch.Deleted {
		delete(e.foreign, p.Namespace+"/"+p.Name)
	} else {
		m.putLocked(p)
	}
	e.mu.Unlock()
	e.kick()
}

func (m foreignMirror) putLocked(p *corev1.Pod) {
	key := p.Namespace + "/" + p.Name
	g := gpuRequest(p)
	if p.Labels[LabelManagedBy] == managedBy {
		// Another gpuportal's: its GPUs are pinned, not requested.
		if gpus, err := parseIndexList(p.Annotations[AnnotationGPUs]); err == nil {
			g = int64(len(gpus))
		}
	}
	if m.e.ours(p) || p.Spec.NodeName == "" || terminal(p) || g == 0 {
		delete(m.e.foreign, key)
		return
	}
	m.e.foreign[key] = foreignPod{node: p.Spec.NodeName, gpus: g}
}
