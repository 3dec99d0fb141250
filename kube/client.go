package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Client asks the API server what the executor needs of it: the nodes,
// and the pods with their bindings and logs, all of the core API group
// (v1). It is what client-go's typed core client does for those, over
// one REST client whose scheme knows the core group alone: client-go's
// kubernetes/scheme registers every API group (some fifty) when a
// program starts, which cost every gpuportal command, the CLI's and the
// simulator's included, about 5 ms and 20 MB of binary.
type Client struct {
	rc     *rest.RESTClient
	params runtime.ParameterCodec
}

// coreScheme knows the core group's objects and the meta types of
// lists, watches, options and errors.
func coreScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("kube: scheme: %w", err)
	}
	metav1.AddToGroupVersion(s, corev1.SchemeGroupVersion)
	return s, nil
}

// restCoreConfig is cfg for a REST client of the core API group whose
// objects s knows.
func restCoreConfig(cfg *rest.Config, s *runtime.Scheme) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return c
}

// NewClient returns a client of the API server cfg reaches.
func NewClient(cfg *rest.Config) (*Client, error) {
	s, err := coreScheme()
	if err != nil {
		return nil, err
	}
	rc, err := rest.RESTClientFor(restCoreConfig(cfg, s))
	if err != nil {
		return nil, fmt.Errorf("kube: client: %w", err)
	}
	return &Client{rc: rc, params: runtime.NewParameterCodec(s)}, nil
}

// Nodes is the cluster's nodes.
func (c *Client) Nodes() Nodes { return Nodes{c} }

// Pods is the pods of namespace ns; "" is every namespace (to list and
// watch only).
func (c *Client) Pods(ns string) Pods { return Pods{c, ns} }

// Nodes asks for the cluster's nodes.
type Nodes struct{ c *Client }

// List lists the nodes o selects.
func (n Nodes) List(ctx context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	out := &corev1.NodeList{}
	err := n.c.rc.Get().UseProtobufAsDefault().Resource("nodes").VersionedParams(&o, n.c.params).Timeout(listTimeout(o)).Do(ctx).Into(out)
	return out, err
}

// Watch watches the nodes o selects.
func (n Nodes) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	return n.c.rc.Get().UseProtobufAsDefault().Resource("nodes").VersionedParams(&o, n.c.params).Timeout(listTimeout(o)).Watch(ctx)
}

// Pods asks for the pods of one namespace, or of all.
type Pods struct {
	c  *Client
	ns string
}

// req is r of the pods: of their namespace, or of all.
func (p Pods) req(r *rest.Request) *rest.Request {
	return r.NamespaceIfScoped(p.ns, p.ns != "").Resource("pods")
}

// object is r of the pods, whose objects go as protobuf (JSON where the
// server answers so), as client-go's typed client sends built-in types:
// smaller and quicker to decode than JSON, for lists and watches of
// every pod most of all.
func (p Pods) object(r *rest.Request) *rest.Request {
	return p.req(r.UseProtobufAsDefault())
}

// List lists the pods o selects.
func (p Pods) List(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := p.object(p.c.rc.Get()).VersionedParams(&o, p.c.params).Timeout(listTimeout(o)).Do(ctx).Into(out)
	return out, err
}

// Watch watches the pods o selects.
func (p Pods) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	return p.object(p.c.rc.Get()).VersionedParams(&o, p.c.params).Timeout(listTimeout(o)).Watch(ctx)
}

// Get reads pod name.
func (p Pods) Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.object(p.c.rc.Get()).Name(name).VersionedParams(&o, p.c.params).Do(ctx).Into(out)
	return out, err
}

// Create creates pod.
func (p Pods) Create(ctx context.Context, pod *corev1.Pod, o metav1.CreateOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.object(p.c.rc.Post()).VersionedParams(&o, p.c.params).Body(pod).Do(ctx).Into(out)
	return out, err
}

// Update writes pod, as read with its resource version.
func (p Pods) Update(ctx context.Context, pod *corev1.Pod, o metav1.UpdateOptions) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := p.object(p.c.rc.Put()).Name(pod.Name).VersionedParams(&o, p.c.params).Body(pod).Do(ctx).Into(out)
	return out, err
}

// Delete deletes pod name.
func (p Pods) Delete(ctx context.Context, name string, o metav1.DeleteOptions) error {
	return p.object(p.c.rc.Delete()).Name(name).Body(&o).Do(ctx).Error()
}

// Bind binds a pod to a node through its binding subresource, as a
// scheduler does.
func (p Pods) Bind(ctx context.Context, b *corev1.Binding, o metav1.CreateOptions) error {
	return p.req(p.c.rc.Post()).Name(b.Name).SubResource("binding").VersionedParams(&o, p.c.params).Body(b).Do(ctx).Error()
}

// GetLogs is the request for pod name's output.
func (p Pods) GetLogs(name string, o *corev1.PodLogOptions) *rest.Request {
	return p.req(p.c.rc.Get()).Name(name).SubResource("log").VersionedParams(o, p.c.params)
}

// listTimeout is the server-side timeout a list or watch asks for, as
// the request's own.
func listTimeout(o metav1.ListOptions) time.Duration {
	if o.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*o.TimeoutSeconds) * time.Second
}
