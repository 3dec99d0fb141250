//go:build kube

// The Kubernetes executor against a real control plane (etcd,
// kube-apiserver and KWOK, built by scripts/ensure-kube). These tests are
// a suite of their own (docs/kubernetes.md, "How it is tested"):
//
//	./scripts/ensure-kube && go test -tags kube ./integration -run TestKubernetes
//
// The binaries take about 40 minutes to build on a loaded 2-core machine
// (cached afterwards), longer than the README's test command may take, so
// it does not run them.

package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The Kubernetes tests run gpuportal (serve --executor kubernetes) in
// front of a throwaway control plane of real binaries, etcd and
// kube-apiserver, built from the Go module proxy by scripts/ensure-kube,
// with KWOK playing the nodes' kubelets: fake nodes with nvidia.com/gpu,
// whose pods run for their job's annotated duration
// (testdata/kube/kwok.yaml). Everything lives in a temporary folder, on
// loopback ports.

// kubeNamespace holds gpuportal's pods in the tests.
const kubeNamespace = "gpuportal"

// needKube returns the folder of kube-apiserver, etcd and kwok, skipping
// the test where they are not built; in CI (CI=true) their absence fails
// it.
func needKube(t *testing.T) string {
	t.Helper()
	dirs := []string{os.Getenv("GPUPORTAL_KUBE_BIN"), "/var/cache/gpuportal/kube/current"}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".cache/gpuportal/kube/current"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		ok := true
		for _, b := range []string{"kube-apiserver", "etcd", "kwok"} {
			if fi, err := os.Stat(filepath.Join(d, b)); err != nil || fi.Mode()&0o111 == 0 {
				ok = false
			}
		}
		if ok {
			return d
		}
	}
	const why = "kube-apiserver, etcd and kwok are not built: scripts/ensure-kube builds them (into /var/cache/gpuportal/kube, or $GPUPORTAL_KUBE_BIN)"
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// kubeCluster is a running throwaway control plane with KWOK's nodes.
type kubeCluster struct {
	t          *testing.T
	dir        string
	bin        string
	kubeconfig string
	cfg        *rest.Config
	core       corev1client.CoreV1Interface
	etcd       *daemon
	apiserver  *daemon
	kwok       *daemon
	etcdURL    string   // etcd's client URL
	apiArgs    []string // kube-apiserver's, to start it again
}

// startKube starts etcd, kube-apiserver and KWOK, and creates nodes fake
// nodes of gpus GPUs each (n00, n01, ...) and the namespace of
// gpuportal's pods. It is stopped when t ends.
func startKube(t *testing.T, nodes, gpus int) *kubeCluster {
	t.Helper()
	return startKubeWith(t, nodes, gpus, "")
}

// startKubeWith is startKube with more of KWOK's configuration (YAML
// documents: its Logs, ClusterLogs, PortForward ... resources) after
// testdata/kube/kwok.yaml's stages.
func startKubeWith(t *testing.T, nodes, gpus int, kwokConfig string) *kubeCluster {
	t.Helper()
	bin := needKube(t)
	began := time.Now()
	dir, err := os.MkdirTemp("", "gpuportal-kube-")
	if err != nil {
		t.Fatal(err)
	}
	c := &kubeCluster{t: t, dir: dir, bin: bin}
	t.Cleanup(func() {
		stopDaemon(c.kwok)
		stopDaemon(c.apiserver)
		stopDaemon(c.etcd)
		if t.Failed() {
			for _, name := range []string{"etcd", "kube-apiserver", "kwok"} {
				if b, err := os.ReadFile(filepath.Join(dir, name+".out")); err == nil {
					t.Logf("%s's last output:\n%s", name, tail(string(b), 3000))
				}
			}
		}
		os.RemoveAll(dir)
	})

	// The service account signing key the API server insists on, and a
	// static token for everyone here (system:masters).
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	mustWrite(t, filepath.Join(dir, "sa.key"), string(keyPEM))
	const token = "gpuportal-test-token"
	mustWrite(t, filepath.Join(dir, "tokens.csv"), token+`,admin,admin,"system:masters"`+"\n")

	clientPort, peerPort, apiPort := freePort(t), freePort(t), freePort(t)
	c.etcd = c.start("etcd", "--name", "test", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", clientPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", clientPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("test=http://127.0.0.1:%d", peerPort),
		"--unsafe-no-fsync", "--log-level", "warn")
	c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	c.apiArgs = []string{
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", clientPort),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(apiPort),
		"--cert-dir", filepath.Join(dir, "certs"), "--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"), "--service-cluster-ip-range", "10.96.0.0/16",
		// No controller manager makes the default service accounts.
		"--disable-admission-plugins", "ServiceAccount",
		// The kubernetes Service's endpoint would be 127.0.0.1, which the
		// endpoint reconciler refuses: nothing here needs it.
		"--endpoint-reconciler-type", "none",
		// The nodes' kubelet is KWOK's server, at the nodes' InternalIP
		// (127.0.0.1, KWOK's --node-ip) and kubelet port (--node-port):
		// their names resolve to nothing. Without
		// --kubelet-certificate-authority the API server does not check
		// the kubelet's certificate (KWOK's is self-signed).
		"--kubelet-preferred-address-types", "InternalIP"}
	c.apiserver = c.start("kube-apiserver", c.apiArgs...)

	// The API server's certificate is its own, self-signed: the client
	// skips its check, on loopback only.
	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	mustWrite(t, c.kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:%d
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, apiPort, token))
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c.cfg = cfg
	if c.core, err = corev1client.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	c.waitReady()
	ctx := context.Background()
	eventually(t, 30*time.Second, "the namespace to be created", func() bool {
		_, err := c.core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeNamespace}}, metav1.CreateOptions{})
		return err == nil
	})
	for i := range nodes {
		c.addNode(fmt.Sprintf("n%02d", i), gpus)
	}
	// KWOK's server stands in for each node's kubelet: the pod log and
	// port-forward requests the API server passes on reach it.
	kubeletPort := freePort(t)
	kwokArgs := []string{"--kubeconfig", c.kubeconfig, "--manage-all-nodes=true",
		"--config", filepath.Join(mustAbs(t, "testdata/kube"), "kwok.yaml"),
		"--server-address", fmt.Sprintf("127.0.0.1:%d", kubeletPort),
		"--node-ip", "127.0.0.1", "--node-port", strconv.Itoa(kubeletPort), "--node-lease-duration-seconds", "0"}
	if kwokConfig != "" {
		extra := filepath.Join(dir, "kwok-extra.yaml")
		mustWrite(t, extra, kwokConfig)
		kwokArgs = append(kwokArgs, "--config", extra)
	}
	c.kwok = c.start("kwok", kwokArgs...)
	eventually(t, 60*time.Second, "KWOK's nodes to be Ready", func() bool {
		l, err := c.core.Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != nodes {
			return false
		}
		for _, n := range l.Items {
			if !nodeReady(&n) {
				return false
			}
		}
		return true
	})
	t.Logf("control plane and %d KWOK nodes ready in %v", nodes, time.Since(began).Round(time.Millisecond))
	return c
}

// waitReady waits until kube-apiserver answers ready.
func (c *kubeCluster) waitReady() {
	c.t.Helper()
	eventually(c.t, 90*time.Second, "kube-apiserver to be ready", func() bool {
		if !c.apiserver.alive() {
			c.t.Fatalf("kube-apiserver exited:\n%s", c.output("kube-apiserver"))
		}
		body, err := c.core.RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil && strings.TrimSpace(string(body)) == "ok"
	})
}

// restartAPIServer crashes kube-apiserver (SIGKILL), runs away while it
// is away, and starts it again on the same port and etcd; it returns once
// the new one is ready. Every watch of the old one is then expired: etcd
// is written to and compacted meanwhile, so a watch from a resource
// version seen before gets 410 Gone, from the new API server's watch cache
// as from etcd, and its client must list again.
func (c *kubeCluster) restartAPIServer(away func()) {
	c.t.Helper()
	c.apiserver.kill()
	if away != nil {
		away()
	}
	rev := c.etcdPost("/v3/kv/put", `{"key":"`+b64("/gpuportal-test/bump")+`","value":"`+b64(time.Now().String())+`"}`)
	c.etcdPost("/v3/kv/compaction", fmt.Sprintf(`{"revision":%s,"physical":true}`, rev))
	c.apiserver = c.start("kube-apiserver", c.apiArgs...)
	c.waitReady()
}

// etcdPost calls etcd's JSON gateway and returns the revision its
// answer's header names.
func (c *kubeCluster) etcdPost(path, body string) string {
	c.t.Helper()
	resp, err := http.Post(c.etcdURL+path, "application/json", strings.NewReader(body))
	if err != nil {
		c.t.Fatalf("etcd %s: %v", path, err)
	}
	defer resp.Body.Close()
	var out struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.Header.Revision == "" {
		c.t.Fatalf("etcd %s: status %d, revision %q (%v)", path, resp.StatusCode, out.Header.Revision, err)
	}
	return out.Header.Revision
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func (c *kubeCluster) start(name string, args ...string) *daemon {
	c.t.Helper()
	out, err := os.OpenFile(filepath.Join(c.dir, name+".out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	d := &daemon{name: name, path: filepath.Join(c.bin, name), args: args, done: make(chan struct{})}
	d.cmd = exec.Command(d.path, args...)
	d.cmd.Dir = c.dir
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		out.Close()
		c.t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = d.cmd.Wait(); out.Close(); close(d.done) }()
	return d
}

func (c *kubeCluster) output(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, name+".out"))
	return tail(string(b), 3000)
}

// addNode creates a fake node with gpus nvidia.com/gpu, which KWOK makes
// Ready. Nodes keep the status they are created with.
func (c *kubeCluster) addNode(name string, gpus int) {
	c.t.Helper()
	res := corev1.ResourceList{
		"nvidia.com/gpu":      *resource.NewQuantity(int64(gpus), resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"type": "kwok", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	created, err := c.core.Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create node %s: %v", name, err)
	}
	if _, ok := created.Status.Allocatable["nvidia.com/gpu"]; !ok {
		// Where the API server drops a new node's status, it is set as a
		// kubelet would.
		created.Status = n.Status
		if _, err := c.core.Nodes().UpdateStatus(context.Background(), created, metav1.UpdateOptions{}); err != nil {
			c.t.Fatalf("set the status of node %s: %v", name, err)
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// gpuWatch checks, from the API server's own objects, that no GPU is
// bound to two Running pods at any moment: it watches every pod and
// after each change looks at those Running on the changed pod's node
// (their GPUs from NVIDIA_VISIBLE_DEVICES). It checks too that a pod of
// a gang (gpuportal.io/parts above 1) turns Running only while the pods
// of all the parts of its run exist. A watch that fails or expires (an
// API server restart) is replaced by a new list, as gpuportal's own.
type gpuWatch struct {
	mu         sync.Mutex
	pods       map[string]*corev1.Pod
	violations []string
	running    int // most pods of gpuportal's Running at once
	now        int // pods of gpuportal's Running now
	everRan    map[string]bool
	// firstRunning is when each pod of gpuportal's was first seen Running.
	firstRunning map[string]time.Time
	relists      int
	changed      chan struct{}
	stop         context.CancelFunc
	done         chan struct{}
}

func (c *kubeCluster) watchGPUs(t *testing.T) *gpuWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &gpuWatch{pods: make(map[string]*corev1.Pod), everRan: make(map[string]bool), firstRunning: make(map[string]time.Time),
		changed: make(chan struct{}, 1), stop: cancel, done: make(chan struct{})}
	rv, err := g.relist(ctx, c.core)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(g.done)
		for ctx.Err() == nil {
			w, err := c.core.Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil {
				if rv, err = g.relistSoon(ctx, c.core); err != nil {
					return
				}
				continue
			}
			expired := false
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					expired = ev.Type == watch.Error
					break
				}
				rv = p.ResourceVersion
				g.apply(ev.Type, p)
			}
			w.Stop()
			if expired {
				if rv, err = g.relistSoon(ctx, c.core); err != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(g.close)
	return g
}

// relist replaces what g knows with a list of every pod, and returns its
// resource version.
func (g *gpuWatch) relist(ctx context.Context, core corev1client.CoreV1Interface) (string, error) {
	l, err := core.Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	listed := make(map[string]bool)
	for i := range l.Items {
		listed[l.Items[i].Namespace+"/"+l.Items[i].Name] = true
	}
	g.mu.Lock()
	var gone []*corev1.Pod
	for k, p := range g.pods {
		if !listed[k] {
			gone = append(gone, p)
		}
	}
	g.relists++
	g.mu.Unlock()
	for _, p := range gone {
		g.apply(watch.Deleted, p)
	}
	for i := range l.Items {
		g.apply(watch.Modified, &l.Items[i])
	}
	return l.ResourceVersion, nil
}

// relistSoon lists again until the API server answers or ctx ends.
func (g *gpuWatch) relistSoon(ctx context.Context, core corev1client.CoreV1Interface) (string, error) {
	for {
		rv, err := g.relist(ctx, core)
		if err == nil || ctx.Err() != nil {
			return rv, ctx.Err()
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (g *gpuWatch) close() {
	g.stop()
	<-g.done
}

func (g *gpuWatch) apply(ev watch.EventType, p *corev1.Pod) {
	defer func() {
		select {
		case g.changed <- struct{}{}:
		default:
		}
	}()
	g.mu.Lock()
	defer g.mu.Unlock()
	key := p.Namespace + "/" + p.Name
	if ev == watch.Deleted {
		delete(g.pods, key)
		return
	}
	g.pods[key] = p
	ours := p.Namespace == kubeNamespace
	if p.Status.Phase == corev1.PodRunning && ours && !g.everRan[p.Name] {
		g.everRan[p.Name] = true
		g.firstRunning[p.Name] = time.Now()
		if parts, _ := strconv.Atoi(p.Annotations["gpuportal.io/parts"]); parts > 1 {
			if n := len(g.runPodsLocked(p)); n != parts {
				g.violations = append(g.violations, fmt.Sprintf("pod %s of a gang of %d Running while only %d of its pods exist", p.Name, parts, n))
			}
		}
	}
	holder := make(map[string]string)
	running := 0
	for k, o := range g.pods {
		if o.Status.Phase != corev1.PodRunning || o.Spec.NodeName == "" {
			continue
		}
		if o.Namespace == kubeNamespace {
			running++
		}
		if o.Spec.NodeName != p.Spec.NodeName {
			continue
		}
		for _, gpu := range podGPUs(o) {
			at := o.Spec.NodeName + ":" + gpu
			if other, ok := holder[at]; ok {
				g.violations = append(g.violations, fmt.Sprintf("GPU %s bound to Running pods %s and %s", at, other, k))
			}
			holder[at] = k
		}
	}
	g.now = running
	g.running = max(g.running, running)
}

// runPodsLocked are the pods of gpuportal's of the same job and run as p.
func (g *gpuWatch) runPodsLocked(p *corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range g.pods {
		if o.Namespace == p.Namespace && o.Labels["gpuportal.io/job"] == p.Labels["gpuportal.io/job"] && o.Labels["gpuportal.io/run"] == p.Labels["gpuportal.io/run"] {
			out = append(out, o)
		}
	}
	return out
}

// waitFor waits until what g has seen satisfies ok (called with g
// locked), reacting to each change at once; it fails t after timeout.
func (g *gpuWatch) waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		g.mu.Lock()
		done := ok()
		g.mu.Unlock()
		if done {
			return
		}
		select {
		case <-g.changed:
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// podGPUs are the GPUs a pod holds: those NVIDIA_VISIBLE_DEVICES names
// (gpuportal's), or nvidia.com/gpu it asks for (another scheduler's,
// "any"), counted from the highest index down as gpuportal leaves them.
func podGPUs(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "NVIDIA_VISIBLE_DEVICES" {
				out = append(out, strings.Split(e.Value, ",")...)
			}
		}
		if q, ok := c.Resources.Limits["nvidia.com/gpu"]; ok {
			for i := range q.Value() {
				out = append(out, strconv.FormatInt(7-i, 10))
			}
		}
	}
	return out
}

func (g *gpuWatch) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, v := range g.violations {
		t.Error(v)
	}
}

// startKubeServer runs gpuportal in front of c, with data in data.
func startKubeServer(t *testing.T, c *kubeCluster, data string, args ...string) *server {
	t.Helper()
	all := append([]string{"--data", data, "--executor", "kubernetes", "--kube-config", c.kubeconfig,
		"--kube-namespace", kubeNamespace, "--grace", "1s"}, args...)
	return startServer(t, all...)
}

// kubeScale is the size of a test: nodes of 8 GPUs and jobs as given, or
// what GPUPORTAL_KUBE_NODES and GPUPORTAL_KUBE_JOBS say (the figures of
// docs/kubernetes.md were measured so: 64 and 1000).
func kubeScale(t *testing.T, defNodes, defJobs int) (nodes, jobs int) {
	nodes, jobs = defNodes, defJobs
	for name, v := range map[string]*int{"GPUPORTAL_KUBE_NODES": &nodes, "GPUPORTAL_KUBE_JOBS": &jobs} {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				t.Fatalf("%s=%q: want a positive number", name, s)
			}
			*v = n
		}
	}
	return nodes, jobs
}

// TestKubernetesRunsJobs submits jobs in the portal and checks that each
// runs as a pod bound to the node gpuportal chose, labelled with its job,
// run and team, and ends; that a pod of another scheduler holding GPUs is
// counted as used; that a gpuportal restart adopts the pods that run; and
// that no GPU is bound to two Running pods at any moment, as the API
// server's own objects say.
func TestKubernetesRunsJobs(t *testing.T) {
	nodes, n := kubeScale(t, 4, 20)
	c := startKube(t, nodes, 8)
	g := c.watchGPUs(t)
	ctx := context.Background()

	// Another scheduler's pod holds 4 GPUs of n00 (bound there directly,
	// asking the device plugin for them).
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "n00", Containers: []corev1.Container{{Name: "c", Image: "train",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}}}},
	}
	if _, err := c.core.Pods("default").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	data := t.TempDir()
	srv := startKubeServer(t, c, data)
	waitGPUs(t, srv.URL, nodes*8-4)
	alice := newAPI(t, srv.URL, "alice", "dev")

	began := time.Now()
	ids := make([]int64, 0, n)
	sizes, secs := []int{1, 2, 1, 4, 1}, 3
	if n > 100 {
		// The scale run: one-GPU jobs long enough for every GPU to be
		// busy at once (creating and binding 508 pods at --kube-qps 50
		// takes about half a minute).
		sizes, secs = []int{1}, 90
	}
	for i := range n {
		var j jobView
		body := map[string]any{"name": fmt.Sprint("k-", i), "gpus": sizes[i%len(sizes)], "sim": map[string]any{"duration_s": secs + i%3}}
		if st := alice.do(http.MethodPost, "/api/v1/jobs", body, &j); st != http.StatusCreated {
			t.Fatalf("submit %d: status %d", i, st)
		}
		ids = append(ids, j.ID)
	}
	submitted := time.Since(began)
	if n > 100 {
		// The scale run: every GPU busy, then every job's pod Running
		// (more jobs than GPUs: in waves).
		full := min(n, nodes*8-4)
		g.waitFor(t, 10*time.Minute, fmt.Sprintf("%d pods Running at once", full), func() bool { return g.running >= full })
		fullAt := time.Since(began)
		g.waitFor(t, 20*time.Minute, fmt.Sprintf("all %d pods to have run", n), func() bool { return len(g.everRan) >= n })
		t.Logf("%d jobs submitted in %v; %d pods Running at once (every free GPU) %v after the first submission; every pod Running once %v after it",
			n, submitted.Round(time.Millisecond), full, fullAt.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	} else {
		// Halfway: gpuportal crashes while pods run, and a new server on
		// the same data adopts them.
		eventually(t, 60*time.Second, "some pods to run", func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.running > 0
		})
		srv.kill()
		srv = startKubeServer(t, c, data, "--addr", strings.TrimPrefix(srv.URL, "http://"))
		alice = newAPI(t, srv.URL, "alice", "dev")
	}
	for _, id := range ids {
		j := alice.waitState(id, time.Duration(60+n/5)*time.Second, "succeeded", "failed", "cancelled")
		if j.State != "succeeded" {
			t.Errorf("job %d ended %s (%s), want succeeded", id, j.State, j.Reason)
		}
	}
	t.Logf("%d jobs on %d nodes x 8 GPUs done in %v", n, nodes, time.Since(began).Round(time.Millisecond))
	g.check(t)

	// Each job ran as a pod labelled with its job, run and team, on the
	// node the portal recorded; no pod of gpuportal's ran on n00's GPUs
	// held by the other pod (checked above); finished pods are deleted.
	g.mu.Lock()
	ran := len(g.everRan)
	g.mu.Unlock()
	if ran < n {
		t.Errorf("%d pods of gpuportal's were seen Running, want at least %d", ran, n)
	}
	eventually(t, 30*time.Second, "gpuportal's finished pods to be deleted", func() bool {
		l, err := c.core.Pods(kubeNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	})
	if _, err := c.core.Pods("default").Get(ctx, "someone-else", metav1.GetOptions{}); err != nil {
		t.Errorf("the other scheduler's pod: %v", err)
	}
}

// TestKubernetesPodEndsInPlainWords: a pod the kubelet OOM-kills, one
// whose image cannot be pulled, and one evicted end their jobs with the
// reason in plain words (the kubelet's status written here as a kubelet
// would, since KWOK runs no containers).
func TestKubernetesPodEndsInPlainWords(t *testing.T) {
	c := startKube(t, 1, 8)
	srv := startKubeServer(t, c, t.TempDir())
	waitGPUs(t, srv.URL, 8)
	alice := newAPI(t, srv.URL, "alice", "dev")
	ctx := context.Background()
	pods := c.core.Pods(kubeNamespace)

	for _, tc := range []struct {
		name   string
		status func(p *corev1.Pod)
		state  string
		reason string
	}{
		{"oom", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", Image: "busybox:stable",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
		}, "failed", "out of memory: Kubernetes killed the container (OOMKilled"},
		{"pull", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "job", Image: "busybox:stable",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
		}, "failed", "could not be pulled (ImagePullBackOff)"},
		{"evicted", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
		}, "", "evicted by Kubernetes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := submit(t, alice, map[string]any{"name": tc.name, "gpus": 1, "retries": 0, "sim": map[string]any{"duration_s": 600}})
			alice.waitState(id, 30*time.Second, "running")
			var pod *corev1.Pod
			eventually(t, 30*time.Second, "the job's pod to run", func() bool {
				l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "gpuportal.io/job=" + strconv.FormatInt(id, 10)})
				if err != nil || len(l.Items) != 1 || l.Items[0].Status.Phase != corev1.PodRunning {
					return false
				}
				pod = &l.Items[0]
				return true
			})
			tc.status(pod)
			if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			var j jobView
			eventually(t, 30*time.Second, "the job to end or be requeued with the pod's reason", func() bool {
				j = alice.job(id)
				if tc.state != "" && j.State != tc.state {
					return false
				}
				return strings.Contains(j.Reason, tc.reason) || strings.Contains(jobHistoryText(t, alice, id), tc.reason)
			})
			if tc.state == "" {
				alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil)
			}
		})
	}
}

// jobHistoryText is a job's history as one string, for its reasons.
func jobHistoryText(t *testing.T, a *api, id int64) string {
	t.Helper()
	var history []map[string]any
	a.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/history", id), nil, &history)
	return fmt.Sprint(history)
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
