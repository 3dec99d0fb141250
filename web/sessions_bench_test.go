package web

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// benchNode is a machine whose sessions are a local HTTP server: what
// an in-process agent's DialSession does (serve --dev).
type benchNode struct {
	addr string
	mu   sync.Mutex
	runs []job.RunRef
}

func (n *benchNode) Name() string { return "bench" }
func (n *benchNode) Devices() []gpu.Device {
	return []gpu.Device{{Index: 0, UUID: "GPU-bench-0", Model: "sim", MemMiB: 81920}}
}
func (n *benchNode) Resources() (int, int64) { return 8, 65536 }
func (n *benchNode) Start(_ context.Context, s job.Spec) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.runs = append(n.runs, job.RunRef{Job: s.JobID, Run: s.Run})
	return nil
}
func (n *benchNode) Stop(context.Context, job.RunRef) error { return nil }
func (n *benchNode) Running() []job.RunRef {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]job.RunRef(nil), n.runs...)
}
func (n *benchNode) Sample(time.Time) []gpu.Sample { return nil }
func (n *benchNode) DialSession(ctx context.Context, _ job.RunRef) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", n.addr)
}

// BenchmarkSessionProxy measures what the portal adds to a request to a
// session, against the same request made directly: the session cookie
// checked, the job read, the portal's credentials stripped, the request
// forwarded over a kept-alive connection. The session is a Go HTTP
// server on loopback, dialed directly as an in-process machine's is (a
// remote machine's adds its agent's tunnel: see TestSessions in
// integration for that, against Jupyter). It reports ns/op of each and
// their ratio.
//
//	go test -run '^$' -bench BenchmarkSessionProxy ./web
func BenchmarkSessionProxy(b *testing.B) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "token tok" && r.URL.Path != "/direct" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"version": "bench"}`)
	}))
	defer backend.Close()
	ts := newTestServer(b)
	ctx := context.Background()
	node := &benchNode{addr: strings.TrimPrefix(backend.URL, "http://")}
	if err := ts.engine.AddNode(ctx, node); err != nil {
		b.Fatal(err)
	}
	j := &models.Job{Name: "nb", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(),
		SessionType: "jupyter", SessionSecret: "k1.salt"}
	if err := ts.store.CreateJob(ctx, j); err != nil {
		b.Fatal(err)
	}
	ts.engine.Wake()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cur, err := ts.store.Job(ctx, j.ID)
		if err != nil {
			b.Fatal(err)
		}
		if cur.State == job.Running {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the session did not start: %s %q", cur.State, cur.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
	portal := httptest.NewServer(ts.Handler())
	defer portal.Close()
	proxied, _ := http.NewRequest(http.MethodGet, portal.URL+ts.store.SessionPrefix(j)+"api", nil)
	proxied.AddCookie(&http.Cookie{Name: sessionCookie, Value: ts.sessions["alice"]})
	direct, _ := http.NewRequest(http.MethodGet, backend.URL+"/direct", nil)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	get := func(b *testing.B, r *http.Request) {
		resp, err := client.Do(r)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", r.URL, resp.StatusCode)
		}
	}
	var nsDirect, nsProxied float64
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			get(b, direct)
		}
		nsDirect = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("proxied", func(b *testing.B) {
		for b.Loop() {
			get(b, proxied)
		}
		nsProxied = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if nsDirect > 0 {
			b.ReportMetric(nsProxied/nsDirect, "x-direct")
			b.ReportMetric(nsProxied-nsDirect, "added-ns/op")
		}
	})
}
