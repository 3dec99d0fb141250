//go:build kube

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/restmapper"
)

// The manifests of deploy/kubernetes, their namespaces and the server's
// service account.
const (
	manifestsDir    = "../deploy/kubernetes"
	serverNamespace = "gpuportal"
	jobsNamespace   = "gpuportal-jobs"
	serviceAccount  = "gpuportal"
)

// TestKubernetesManifests applies deploy/kubernetes to a real API server
// (server-side apply, as kubectl apply --server-side does) and checks
// that every object is accepted; that the service account's RBAC allows
// each request the executor makes (kube/) and nothing around it, as the
// API server's SubjectAccessReview answers; that a server run with the
// Deployment's flags, under that service account's own token, runs a
// job as a pod in the jobs' namespace; and that an agent run with the
// monitor DaemonSet's flags becomes the monitor of its node. No
// controller manager or kubelet runs here: the Deployment, StatefulSet
// and DaemonSet make no pods; their containers' flags are run by the
// test itself.
func TestKubernetesManifests(t *testing.T) {
	c := startKube(t, 2, 8)
	ctx := context.Background()
	objs := c.apply(t, manifestsDir)
	if t.Failed() {
		t.FailNow()
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
		"Deployment", "Service", "StatefulSet", "DaemonSet", "PersistentVolumeClaim", "NetworkPolicy"} {
		if kinds[k] == 0 {
			t.Errorf("deploy/kubernetes has no %s", k)
		}
	}

	// RBAC: exactly what kube/ asks for.
	sa := "system:serviceaccount:" + serverNamespace + ":" + serviceAccount
	authz, err := authzclient.NewForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		verb, resource, sub, ns string
		want                    bool
	}{
		// The executor's requests (kube/executor.go).
		{"create", "pods", "", jobsNamespace, true},
		{"get", "pods", "", jobsNamespace, true},
		{"update", "pods", "", jobsNamespace, true},
		{"delete", "pods", "", jobsNamespace, true},
		{"create", "pods", "binding", jobsNamespace, true},
		{"get", "pods", "log", jobsNamespace, true},
		{"create", "pods", "portforward", jobsNamespace, true},
		{"list", "pods", "", jobsNamespace, true},
		{"watch", "pods", "", jobsNamespace, true},
		{"list", "pods", "", "", true},
		{"watch", "pods", "", "", true},
		{"list", "nodes", "", "", true},
		{"watch", "nodes", "", "", true},
		// Nothing around them.
		{"create", "pods", "", "default", false},
		{"delete", "pods", "", "default", false},
		{"create", "pods", "", serverNamespace, false},
		{"patch", "pods", "", jobsNamespace, false},
		{"create", "pods", "exec", jobsNamespace, false},
		{"get", "pods", "log", "default", false},
		{"get", "pods", "log", serverNamespace, false},
		{"create", "pods", "portforward", "default", false},
		{"create", "pods", "portforward", serverNamespace, false},
		{"get", "pods", "portforward", jobsNamespace, false},
		{"get", "pods", "proxy", jobsNamespace, false},
		{"create", "pods", "attach", jobsNamespace, false},
		{"create", "pods", "eviction", jobsNamespace, false},
		{"get", "nodes", "", "", false},
		{"update", "nodes", "", "", false},
		{"patch", "nodes", "status", "", false},
		{"delete", "nodes", "", "", false},
		{"get", "secrets", "", serverNamespace, false},
		{"list", "secrets", "", "", false},
		{"create", "serviceaccounts", "token", jobsNamespace, false},
		{"create", "deployments", "", serverNamespace, false},
	} {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + serverNamespace, "system:authenticated"},
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: tc.ns, Verb: tc.verb, Resource: tc.resource, Subresource: tc.sub}}}
		got, err := authz.SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		if got.Status.Allowed != tc.want {
			t.Errorf("the service account may %s %s%s in %q: %v, want %v (%s)", tc.verb, tc.resource,
				cutEmpty("/", tc.sub), tc.ns, got.Status.Allowed, tc.want, got.Status.Reason)
		}
	}

	// The Secret the manifests name, made as docs/kubernetes.md says.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gpuportal", Namespace: serverNamespace},
		StringData: map[string]string{"agent-token": agentToken, "db-password": "unused-here"}}
	if _, err := c.core.Secrets(serverNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The server as the Deployment runs it (its database and data folder
	// aside: SQLite in a temporary folder), with the service account's
	// own token, as in its pod.
	server := manifestContainer(t, objs, "Deployment", "gpuportal", "server")
	args := containerArgs(t, server, secret.StringData, map[string]string{})
	if args[0] != "serve" {
		t.Fatalf("the server's args begin with %q, want serve", args[0])
	}
	args = slices.DeleteFunc(args[1:], func(a string) bool {
		return strings.HasPrefix(a, "--addr=") || strings.HasPrefix(a, "--data=") || strings.HasPrefix(a, "--db=")
	})
	for _, want := range []string{"--executor=kubernetes", "--kube-namespace=" + jobsNamespace, "--agent-token=" + agentToken} {
		if !slices.Contains(args, want) {
			t.Errorf("the server's args %q lack %s", args, want)
		}
	}
	tok, err := c.core.ServiceAccounts(serverNamespace).CreateToken(ctx, serviceAccount,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of the service account: %v", err)
	}
	saConfig := filepath.Join(c.dir, "sa-kubeconfig")
	mustWrite(t, saConfig, strings.Replace(mustRead(t, c.kubeconfig), "token: gpuportal-test-token", "token: "+tok.Status.Token, 1))
	srv := startServer(t, append([]string{"--data", t.TempDir(), "--kube-config", saConfig}, args...)...)
	waitGPUs(t, srv.URL, 16)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "as-the-service-account", "gpus": 2, "sim": map[string]any{"duration_s": 3}})
	alice.waitState(id, 60*time.Second, "running", "succeeded")
	eventually(t, 30*time.Second, "the job's pod Running in "+jobsNamespace, func() bool {
		l, err := c.core.Pods(jobsNamespace).List(ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf("gpuportal.io/job=%d", id)})
		return err == nil && len(l.Items) == 1 && l.Items[0].Status.Phase == corev1.PodRunning
	})
	if j := alice.waitState(id, 60*time.Second, "succeeded", "failed", "cancelled"); j.State != "succeeded" {
		t.Errorf("the job ended %s (%s), want succeeded", j.State, j.Reason)
	}
	eventually(t, 30*time.Second, "its finished pod to be deleted", func() bool {
		l, err := c.core.Pods(jobsNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	})
	if out := srv.output(); strings.Contains(strings.ToLower(out), "forbidden") {
		t.Errorf("the server was refused a request:\n%s", tail(out, 3000))
	}
	// The job's pod above was admitted under the namespace's restricted
	// Pod Security Standard; a pod that does not meet it is not.
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "as-its-image-says", Namespace: jobsNamespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:stable"}}}}
	if _, err := c.core.Pods(jobsNamespace).Create(ctx, plain, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "restricted") {
		t.Errorf("a pod without the restricted settings in %s: %v; want it refused by the Pod Security admission", jobsNamespace, err)
	}

	// The monitor as the DaemonSet runs it on node n00 (simulated GPUs
	// instead of NVML, the test server's URL instead of the Service's).
	monitor := manifestContainer(t, objs, "DaemonSet", "gpuportal-monitor", "monitor")
	margs := containerArgs(t, monitor, secret.StringData, map[string]string{"spec.nodeName": "n00"})
	if margs[0] != "agent" || !slices.Contains(margs, "--monitor-only") || !slices.Contains(margs, "--name=n00") {
		t.Fatalf("the monitor's args %q: want agent --monitor-only --name=$(NODE_NAME)", margs)
	}
	margs = slices.DeleteFunc(margs[1:], func(a string) bool {
		return strings.HasPrefix(a, "--gpus=") || strings.HasPrefix(a, "--server=") || strings.HasPrefix(a, "--work-dir=")
	})
	startAgent(t, srv.URL, "n00", append(margs, "--gpus", "sim:1x8x80")...)
	admin := newAPI(t, srv.URL, "admin", "dev")
	eventually(t, 30*time.Second, "n00's monitor", func() bool { return nodes(t, admin)["n00"].LiveMemoryUnavailable == "" })
	if why := nodes(t, admin)["n01"].LiveMemoryUnavailable; !strings.Contains(why, "no gpuportal agent in monitor mode on node n01") {
		t.Errorf("n01 without a monitor: %q", why)
	}
}

func cutEmpty(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// apply applies every object of the YAML files in dir to c with
// server-side apply, namespaces first, and returns them as the API server
// stored them.
func (c *kubeCluster) apply(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
		for {
			var m map[string]any
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(m) > 0 {
				objs = append(objs, &unstructured.Unstructured{Object: m})
			}
		}
		r.Close()
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return boolInt(b.GetKind() == "Namespace") - boolInt(a.GetKind() == "Namespace")
	})
	dc, err := discovery.NewDiscoveryClientForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		what := fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s: the API server serves no such kind: %v", what, err)
			continue
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if o.GetNamespace() == "" {
				t.Errorf("%s: no namespace", what)
				continue
			}
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "gpuportal-test", Force: new(true)})
		if err != nil {
			t.Errorf("apply %s: %v", what, err)
			continue
		}
		out = append(out, got)
	}
	t.Logf("applied %d objects of %s", len(out), dir)
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// manifestContainer is container name of the pod template of the kind
// named name among objs, as the API server stored it.
func manifestContainer(t *testing.T, objs []*unstructured.Unstructured, kind, name, container string) corev1.Container {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != kind || o.GetName() != name {
			continue
		}
		raw, found, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if err != nil || !found {
			t.Fatalf("%s %s has no containers (%v)", kind, name, err)
		}
		for _, r := range raw {
			var ctr corev1.Container
			if err := convertJSON(r, &ctr); err != nil {
				t.Fatal(err)
			}
			if ctr.Name == container {
				return ctr
			}
		}
	}
	t.Fatalf("no container %s in %s %s", container, kind, name)
	return corev1.Container{}
}

func convertJSON(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// containerArgs are ctr's args with each $(VAR) replaced as the kubelet
// does, from its env: a value, a key of the Secret (secret) or a field
// of the pod (fields). A reference to a variable it does not define
// fails the test (the kubelet would leave it as it is).
func containerArgs(t *testing.T, ctr corev1.Container, secret, fields map[string]string) []string {
	t.Helper()
	env := map[string]string{}
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			v, ok := secret[e.ValueFrom.SecretKeyRef.Key]
			if !ok || e.ValueFrom.SecretKeyRef.Name != "gpuportal" {
				t.Fatalf("env %s: no key %s in the Secret gpuportal", e.Name, e.ValueFrom.SecretKeyRef.Key)
			}
			env[e.Name] = v
		case e.ValueFrom.FieldRef != nil:
			v, ok := fields[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("env %s: the test gives no %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env[e.Name] = v
		}
	}
	args := slices.Concat(ctr.Command, ctr.Args)
	for i, a := range args {
		args[i] = envRef.ReplaceAllStringFunc(a, func(ref string) string {
			name := ref[2 : len(ref)-1]
			v, ok := env[name]
			if !ok {
				t.Errorf("container %s: %s refers to no variable of its env", ctr.Name, ref)
			}
			return v
		})
	}
	if len(args) == 0 {
		t.Fatalf("container %s has no args", ctr.Name)
	}
	return args
}

var envRef = regexp.MustCompile(`\$\([A-Za-z_][A-Za-z0-9_]*\)`)
