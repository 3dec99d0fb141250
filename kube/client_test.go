package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// apiRecorder is an API server that answers each request with the
// answer its path and method were given, and keeps what it was asked.
type apiRecorder struct {
	mu    sync.Mutex
	asked []string // "METHOD path?query body"
}

func (a *apiRecorder) serve(t *testing.T, answers map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.asked = append(a.asked, strings.TrimSpace(fmt.Sprintf("%s %s (accept %s, content %s) %q",
			r.Method, r.URL.RequestURI(), r.Header.Get("Accept"), r.Header.Get("Content-Type"), body)))
		a.mu.Unlock()
		answer, ok := answers[r.Method+" "+r.URL.Path]
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"no %s"}`, r.URL.Path)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/log") {
			w.Header().Set("Content-Type", "text/plain")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		fmt.Fprint(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (a *apiRecorder) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// The calls the executor makes of nodes and pods, as both this
// package's Client and client-go's typed core client have them.
type (
	nodeCalls interface {
		List(context.Context, metav1.ListOptions) (*corev1.NodeList, error)
	}
	podCalls interface {
		List(context.Context, metav1.ListOptions) (*corev1.PodList, error)
		Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
		Create(context.Context, *corev1.Pod, metav1.CreateOptions) (*corev1.Pod, error)
		Update(context.Context, *corev1.Pod, metav1.UpdateOptions) (*corev1.Pod, error)
		Delete(context.Context, string, metav1.DeleteOptions) error
		Bind(context.Context, *corev1.Binding, metav1.CreateOptions) error
		GetLogs(string, *corev1.PodLogOptions) *rest.Request
	}
)

// TestClientSpeaksTheCoreAPI makes each call of the executor's client,
// and the same with client-go's typed core client, of one recording API
// server: the requests must be the same, method, path, query and body,
// and so must the answers decoded (lists, a pod, an error status, a
// log). The Kubernetes suite (integration/kube_test.go, tag kube) runs
// the executor against a real API server.
func TestClientSpeaksTheCoreAPI(t *testing.T) {
	pod := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"gp-1-1-n0","namespace":"jobs","resourceVersion":"7","labels":{"gpuportal.io/job":"1"}},"spec":{"nodeName":"n0"},"status":{"phase":"Running"}}`
	answers := map[string]string{
		"GET /api/v1/nodes":                                   `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"41"},"items":[{"metadata":{"name":"n0"},"status":{"capacity":{"nvidia.com/gpu":"8"}}}]}`,
		"GET /api/v1/namespaces/jobs/pods":                    `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[` + pod + `]}`,
		"GET /api/v1/pods":                                    `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"43"},"items":[]}`,
		"GET /api/v1/namespaces/jobs/pods/gp-1-1-n0":          pod,
		"POST /api/v1/namespaces/jobs/pods":                   pod,
		"PUT /api/v1/namespaces/jobs/pods/gp-1-1-n0":          pod,
		"DELETE /api/v1/namespaces/jobs/pods/gp-1-1-n0":       `{"kind":"Status","apiVersion":"v1","status":"Success"}`,
		"POST /api/v1/namespaces/jobs/pods/gp-1-1-n0/binding": `{"kind":"Status","apiVersion":"v1","status":"Success"}`,
		"GET /api/v1/namespaces/jobs/pods/gp-1-1-n0/log":      "2026-11-30T10:00:00Z step 1\n",
	}
	ctx := context.Background()
	calls := func(t *testing.T, nodes nodeCalls, pods, all podCalls) []string {
		t.Helper()
		var seen []string
		say := func(format string, args ...any) { seen = append(seen, fmt.Sprintf(format, args...)) }
		nl, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: "gpu=h100"})
		if err != nil {
			t.Fatal(err)
		}
		say("nodes %s at %s, GPUs %d", nl.Items[0].Name, nl.ResourceVersion, nl.Items[0].Status.Capacity.Name("nvidia.com/gpu", "").Value())
		pl, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "gpuportal.io/job=1", ResourceVersion: "40", TimeoutSeconds: ptr(int64(30))})
		if err != nil {
			t.Fatal(err)
		}
		say("pods %s %s at %s", pl.Items[0].Name, pl.Items[0].Status.Phase, pl.ResourceVersion)
		if _, err := all.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!=,status.phase!=Succeeded"}); err != nil {
			t.Fatal(err)
		}
		got, err := pods.Get(ctx, "gp-1-1-n0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		say("get %s on %s at %s", got.Name, got.Spec.NodeName, got.ResourceVersion)
		spec := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gp-1-1-n0", Labels: map[string]string{"gpuportal.io/job": "1"}},
			Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "gpuportal.io/placement"}},
				Containers: []corev1.Container{{Name: "job", Image: "busybox", Env: []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "2,5"}}}}}}
		if _, err := pods.Create(ctx, spec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got.Spec.SchedulingGates = nil
		if _, err := pods.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pods.Delete(ctx, "gp-1-1-n0", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(10))}); err != nil {
			t.Fatal(err)
		}
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "gp-1-1-n0", UID: "u1"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n0"}}
		if err := pods.Bind(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		since := metav1.NewTime(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		rc, err := pods.GetLogs("gp-1-1-n0", &corev1.PodLogOptions{Container: "job", Follow: true, Timestamps: true, SinceTime: &since}).Stream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(rc)
		rc.Close()
		say("log %q", out)
		// An error answer is the API's error, as the executor tests it.
		_, err = pods.Get(ctx, "nobody", metav1.GetOptions{})
		say("missing pod: not found %v", apierrors.IsNotFound(err))
		return seen
	}

	ours := &apiRecorder{}
	srv := ours.serve(t, answers)
	c, err := NewClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	saw := calls(t, c.Nodes(), c.Pods("jobs"), c.Pods(""))

	theirs := &apiRecorder{}
	srv = theirs.serve(t, answers)
	cg, err := corev1client.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	sawCG := calls(t, cg.Nodes(), cg.Pods("jobs"), cg.Pods(""))

	if strings.Join(saw, "\n") != strings.Join(sawCG, "\n") {
		t.Errorf("answers read:\n%s\nclient-go's typed client read:\n%s", strings.Join(saw, "\n"), strings.Join(sawCG, "\n"))
	}
	want := []string{"nodes n0 at 41, GPUs 8", "pods gp-1-1-n0 Running at 42", "get gp-1-1-n0 on n0 at 7",
		`log "2026-11-30T10:00:00Z step 1\n"`, "missing pod: not found true"}
	if strings.Join(saw, "\n") != strings.Join(want, "\n") {
		t.Errorf("answers read:\n%s\nwant:\n%s", strings.Join(saw, "\n"), strings.Join(want, "\n"))
	}
	asked, askedCG := ours.requests(), theirs.requests()
	if len(asked) != 10 || len(asked) != len(askedCG) {
		t.Fatalf("asked %d requests, client-go's client %d (want 10):\n%s\n\n%s", len(asked), len(askedCG), strings.Join(asked, "\n"), strings.Join(askedCG, "\n"))
	}
	for i := range asked {
		if asked[i] != askedCG[i] {
			t.Errorf("request %d:\n           got %s\nclient-go asks %s", i+1, asked[i], askedCG[i])
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestClientWatches decodes a watch of pods as the API server streams
// it, as JSON and as protobuf (what it sends the typed clients, which
// ask for it first): each event's type and object, to the stream's end,
// the same as client-go's typed client decodes them.
func TestClientWatches(t *testing.T) {
	sch, err := coreScheme()
	if err != nil {
		t.Fatal(err)
	}
	events := []struct {
		typ   watch.EventType
		name  string
		phase corev1.PodPhase
	}{{watch.Added, "a", corev1.PodPending}, {watch.Modified, "a", corev1.PodRunning}, {watch.Deleted, "a", corev1.PodSucceeded}}
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		t.Run(mediaType, func(t *testing.T) {
			info, ok := runtime.SerializerInfoForMediaType(serializer.NewCodecFactory(sch).SupportedMediaTypes(), mediaType)
			if !ok || info.StreamSerializer == nil {
				t.Fatalf("no stream serializer for %s", mediaType)
			}
			enc := serializer.NewCodecFactory(sch).EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
			var stream bytes.Buffer
			w := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&stream), info.StreamSerializer.Serializer)
			for _, e := range events {
				raw, err := runtime.Encode(enc, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: e.name, ResourceVersion: "9"}, Status: corev1.PodStatus{Phase: e.phase}})
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Encode(&metav1.WatchEvent{Type: string(e.typ), Object: runtime.RawExtension{Raw: raw}}); err != nil {
					t.Fatal(err)
				}
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("watch") != "true" {
					http.Error(w, "want a watch", http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", mediaType+";stream=watch")
				w.Write(stream.Bytes())
			}))
			defer srv.Close()
			read := func(pods interface {
				Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
			}) []string {
				w, err := pods.Watch(context.Background(), metav1.ListOptions{ResourceVersion: "8"})
				if err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
				var got []string
				for e := range w.ResultChan() {
					p, ok := e.Object.(*corev1.Pod)
					if !ok {
						t.Fatalf("event %s of a %T (%v); want a pod", e.Type, e.Object, e.Object)
					}
					got = append(got, fmt.Sprintf("%s %s %s", e.Type, p.Name, p.Status.Phase))
				}
				return got
			}
			c, err := NewClient(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			cg, err := corev1client.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			got, gotCG := read(c.Pods("jobs")), read(cg.Pods("jobs"))
			want := "ADDED a Pending,MODIFIED a Running,DELETED a Succeeded"
			if strings.Join(got, ",") != want || strings.Join(gotCG, ",") != want {
				t.Errorf("events %v, client-go's %v; want %s", got, gotCG, want)
			}
		})
	}
}
