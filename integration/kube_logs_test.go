//go:build kube

package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuportal/gpuportal/client"
)

// What stands in for what: KWOK's server is each node's kubelet (the
// API server passes pods/log and pods/portforward to it, at the node's
// InternalIP and kubelet port); a container's log is a file in the CRI
// format that the test writes, as a container runtime would (KWOK's
// Logs and ClusterLogs resources name it); a session's server in its
// pod is a small HTTP server of the test's, which KWOK's
// ClusterPortForward forwards the pod's port to.

// criLine is one line of a container's log as the runtime writes it.
func criLine(text string) string {
	return time.Now().UTC().Format(time.RFC3339Nano) + " stdout F " + text + "\n"
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestKubernetesLogs: a job's output is what its pod's container wrote,
// read through the real API server's pods/log from the kubelet (KWOK's
// server reading a log file), on the job's page, through the API and
// the CLI's follow, as it is written, and still once the pod is gone. A
// gang's first part is the job's output, and each other part's is kept
// beside it. A job that ends at once keeps all its output too.
func TestKubernetesLogs(t *testing.T) {
	logs := t.TempDir()
	n00, n01, single := filepath.Join(logs, "n00.log"), filepath.Join(logs, "n01.log"), filepath.Join(logs, "single.log")
	appendFile(t, n00, criLine("n00: epoch 1 loss 0.91"))
	appendFile(t, n01, criLine("n01: epoch 1 loss 0.92"))
	appendFile(t, single, criLine("single: hello")+criLine("single: done"))
	// The first job (1, run 1) is a gang on both nodes: each of its pods
	// its own log (KWOK's Logs, by pod name, which it looks up before its
	// ClusterLogs); every other pod of the namespace the third file.
	kwok := fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Logs
metadata: {name: gpuportal-1-1-n00, namespace: %[1]s}
spec:
  logs: [{logsFile: %[2]s, follow: true}]
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Logs
metadata: {name: gpuportal-1-1-n01, namespace: %[1]s}
spec:
  logs: [{logsFile: %[3]s, follow: true}]
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata: {name: others}
spec:
  selector: {matchNamespaces: [%[1]s]}
  logs: [{logsFile: %[4]s, follow: true}]
`, kubeNamespace, n00, n01, single)
	c := startKubeWith(t, 2, 8, kwok)
	data := t.TempDir()
	srv := startKubeServer(t, c, data)
	waitGPUs(t, srv.URL, 16)
	alice := newAPI(t, srv.URL, "alice", "dev")
	ctx := context.Background()

	id := submit(t, alice, map[string]any{"name": "gang", "gpus": 16, "sim": map[string]any{"duration_s": 600}})
	if id != 1 {
		t.Fatalf("the first job is %d, not 1: KWOK's logs name its pods", id)
	}
	alice.waitState(id, 60*time.Second, "running")
	// Which node's pod is the first part (rank 0), the job's output.
	first, other := n00, n01
	eventually(t, 30*time.Second, "the gang's pods to run", func() bool {
		l, err := c.core.Pods(kubeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "gpuportal.io/job=1"})
		if err != nil || len(l.Items) != 2 {
			return false
		}
		for _, p := range l.Items {
			if p.Status.Phase != corev1.PodRunning {
				return false
			}
			if p.Name != "gpuportal-1-1-n00" && p.Name != "gpuportal-1-1-n01" {
				t.Fatalf("pod %s: not a name KWOK's logs know", p.Name)
			}
			if p.Annotations["gpuportal.io/rank"] == "0" && p.Spec.NodeName == "n01" {
				first, other = n01, n00
			}
		}
		return true
	})
	firstNode := strings.TrimSuffix(filepath.Base(first), ".log")
	otherNode := strings.TrimSuffix(filepath.Base(other), ".log")
	eventually(t, 30*time.Second, "the first part's output through the API", func() bool {
		return strings.Contains(jobLog(t, alice, id), firstNode+": epoch 1")
	})
	// Follow it as the CLI does, while the container writes more.
	var followed syncBuffer
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	followDone := make(chan error, 1)
	go func() {
		_, err := alice.client().FollowLogs(fctx, id, &followed, client.Follow{Tail: 1 << 20, Interval: 200 * time.Millisecond})
		followDone <- err
	}()
	written := time.Now()
	appendFile(t, first, criLine(firstNode+": epoch 2 loss 0.55"))
	appendFile(t, other, criLine(otherNode+": epoch 2 loss 0.56"))
	eventually(t, 30*time.Second, "the new line in the followed output", func() bool {
		return strings.Contains(followed.String(), firstNode+": epoch 2")
	})
	t.Logf("a line the container wrote was in the CLI's follow %v later (through pods/log, follow)", time.Since(written).Round(time.Millisecond))
	out := jobLog(t, alice, id)
	if want := firstNode + ": epoch 1 loss 0.9"; !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 2 || strings.Contains(out, "stdout F") {
		t.Errorf("the job's output %q: want the container's two lines, without timestamps", out)
	}
	partFile := filepath.Join(data, "kube", "jobs", "1", "output.r1.log")
	eventually(t, 30*time.Second, "the other part's output kept beside the job's", func() bool {
		b, _ := os.ReadFile(partFile)
		return strings.Contains(string(b), otherNode+": epoch 2")
	})

	// Cancelled: the pods are deleted; the output stays.
	if st := alice.do(http.MethodDelete, "/api/v1/jobs/1", nil, nil); st != http.StatusOK && st != http.StatusAccepted && st != http.StatusNoContent {
		t.Fatalf("cancel: status %d", st)
	}
	alice.waitState(id, 30*time.Second, "cancelled")
	eventually(t, 30*time.Second, "the gang's pods to be deleted", func() bool {
		l, err := c.core.Pods(kubeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "gpuportal.io/job=1"})
		return err == nil && len(l.Items) == 0
	})
	select {
	case err := <-followDone:
		if err != nil {
			t.Errorf("follow: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the follow did not end with the job")
	}
	if got := jobLog(t, alice, id); got != out {
		t.Errorf("after the pods were deleted the output is %q, want %q", got, out)
	}
	b := newBrowser(t, srv.URL)
	b.login("alice", "dev")
	if st, page := b.get("/jobs/1"); st != http.StatusOK || !strings.Contains(page, firstNode+": epoch 2 loss 0.55") {
		t.Errorf("the job's page (status %d) does not show its output", st)
	}

	// A job whose pod ends at once: its output is read to the end before
	// its pod is deleted.
	id2 := submit(t, alice, map[string]any{"name": "short", "gpus": 1, "sim": map[string]any{"duration_s": 1}})
	if j := alice.waitState(id2, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("job %d %s: %s", id2, j.State, j.Reason)
	}
	eventually(t, 30*time.Second, "the short job's pod to be deleted", func() bool {
		l, err := c.core.Pods(kubeNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	})
	if got := jobLog(t, alice, id2); got != "single: hello\nsingle: done\n" {
		t.Errorf("the short job's output %q, want its container's two lines", got)
	}
}

// syncBuffer is a bytes.Buffer written by one goroutine and read by
// another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKubernetesSession: a web session runs as a pod serving on its
// port, and the portal's proxy reaches it through the real API server's
// pods/portforward (KWOK's server, the kubelet, forwards the pod's port
// to the test's HTTP server standing in for the container's), with the
// session's token and under its secret prefix; a terminal session is
// refused with the reason.
func TestKubernetesSession(t *testing.T) {
	type seen struct{ path, auth string }
	reqs := make(chan seen, 16)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inPod := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case reqs <- seen{r.URL.Path, r.Header.Get("Authorization")}:
		default:
		}
		io.WriteString(w, "hello from the pod's web app")
	})}
	go inPod.Serve(ln)
	t.Cleanup(func() { inPod.Close() })
	kwok := fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata: {name: sessions}
spec:
  selector: {matchNamespaces: [%s]}
  forwards:
  - ports: [6006]
    target: {address: 127.0.0.1, port: %d}
`, kubeNamespace, ln.Addr().(*net.TCPAddr).Port)
	c := startKubeWith(t, 1, 8, kwok)
	srv := startKubeServer(t, c, t.TempDir())
	waitGPUs(t, srv.URL, 8)
	alice := newAPI(t, srv.URL, "alice", "dev")
	ctx := context.Background()

	s := startSession(t, alice, map[string]any{"name": "tb", "gpus": 1,
		"command": []string{"tensorboard", "--logdir", "runs", "--port", "6006", "--host", "0.0.0.0"},
		"session": map[string]any{"type": "web", "port": 6006}})
	var pod corev1.Pod
	eventually(t, 30*time.Second, "the session's pod to run", func() bool {
		l, err := c.core.Pods(kubeNamespace).List(ctx, metav1.ListOptions{LabelSelector: "gpuportal.io/job=" + strconv.FormatInt(s.ID, 10)})
		if err != nil || len(l.Items) != 1 || l.Items[0].Status.Phase != corev1.PodRunning {
			return false
		}
		pod = l.Items[0]
		return true
	})
	var token string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "GPUPORTAL_SESSION_TOKEN" {
			token = e.Value
		}
	}
	if p := pod.Spec.Containers[0].Ports; len(p) != 1 || p[0].ContainerPort != 6006 || token == "" {
		t.Fatalf("the session's pod declares ports %v and token %q", p, token)
	}

	// Through the portal's proxy, as a script with its API token.
	var body string
	began := time.Now()
	eventually(t, 30*time.Second, "the session to answer through the proxy", func() bool {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+s.Session.URL+"data/runs", nil)
		req.Header.Set("Authorization", "Bearer "+alice.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	t.Logf("the session answered through the proxy and pods/portforward %v after it ran", time.Since(began).Round(time.Millisecond))
	if body != "hello from the pod's web app" {
		t.Errorf("the proxy answered %q", body)
	}
	select {
	case r := <-reqs:
		if r.path != s.Session.URL+"data/runs" || r.auth != "token "+token {
			t.Errorf("the session's server got %s with Authorization %q, want %s with the session's token", r.path, r.auth, s.Session.URL+"data/runs")
		}
	default:
		t.Error("the session's server got no request")
	}
	// Another user may not reach it.
	bob := newAPI(t, srv.URL, "bob", "dev")
	req, _ := http.NewRequest(http.MethodGet, srv.URL+s.Session.URL, nil)
	req.Header.Set("Authorization", "Bearer "+bob.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob's request: %s, want 403", resp.Status)
	}

	// A terminal needs gpuportal's agent: refused, saying so.
	var term jobView
	if st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "sh", "gpus": 1, "session": map[string]any{"type": "terminal"}}, &term); st != http.StatusCreated {
		t.Fatalf("submit a terminal: status %d", st)
	}
	eventually(t, 30*time.Second, "the terminal session to be refused", func() bool {
		j := alice.job(term.ID)
		return strings.Contains(j.Reason+jobHistoryText(t, alice, term.ID), "terminal sessions do not run on Kubernetes")
	})
	alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", s.ID), nil, nil)
	alice.waitState(s.ID, 30*time.Second, "cancelled")
}
