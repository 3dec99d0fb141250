package hub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/joboutput"
)

// fakeRegistry stands in for the engine: it records machines joining and
// leaving, and collects exits.
type fakeRegistry struct {
	mu     sync.Mutex
	nodes  map[string]engine.Node
	events []string // "add NAME [running jobs]", "remove NAME"
	exits  chan job.Exit
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{nodes: make(map[string]engine.Node), exits: make(chan job.Exit, 16)}
}

func (r *fakeRegistry) AddNode(_ context.Context, n engine.Node) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes[n.Name()] = n
	r.events = append(r.events, fmt.Sprintf("add %s %v", n.Name(), n.Running()))
	return nil
}

func (r *fakeRegistry) RemoveNode(_ context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.nodes, name)
	r.events = append(r.events, "remove "+name)
	return nil
}

func (r *fakeRegistry) Nodes() []engine.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []engine.Node
	for _, n := range r.nodes {
		out = append(out, n)
	}
	return out
}

func (r *fakeRegistry) Exits() chan<- job.Exit { return r.exits }

func (r *fakeRegistry) node(name string) engine.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodes[name]
}

func (r *fakeRegistry) history() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

const testAgentToken = "agent-secret"

// startHub serves an agent hub with a short heartbeat timeout.
func startHub(t testing.TB, tlsServer bool) (*Hub, *httptest.Server, *fakeRegistry) {
	t.Helper()
	reg := newFakeRegistry()
	hub := New(Config{
		Token: testAgentToken, HeartbeatTimeout: 600 * time.Millisecond, Dir: t.TempDir(), AckTimeout: 5 * time.Second,
	}, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var srv *httptest.Server
	if tlsServer {
		srv = httptest.NewTLSServer(hub)
	} else {
		srv = httptest.NewServer(hub)
	}
	t.Cleanup(srv.Close)
	return hub, srv, reg
}

// startClient runs an agent with one simulated 2-GPU machine named name.
func startClient(t *testing.T, server string, tlsCfg *tls.Config, name string) *agent.Local {
	t.Helper()
	exits := make(chan job.Exit, 16)
	a, err := agent.New(agent.Config{Name: name, Backend: gpu.NewSim(name, 2, 8192), WorkDir: t.TempDir(), Grace: time.Second,
		CPUs: 16, MemMiB: 65536, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, exits)
	if err != nil {
		t.Fatal(err)
	}
	c, err := agent.NewClient(agent.ClientConfig{
		Server: server, Token: testAgentToken, Nodes: []*agent.Local{a}, Exits: exits, TLS: tlsCfg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SampleEvery: 100 * time.Millisecond,
		LogEvery: 50 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = a.Shutdown(context.Background())
	})
	return a
}

func waitUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitNode(t *testing.T, reg *fakeRegistry, name string) engine.Node {
	t.Helper()
	waitUntil(t, "machine "+name+" to join", func() bool { return reg.node(name) != nil })
	return reg.node(name)
}

func nextExit(t *testing.T, reg *fakeRegistry) job.Exit {
	t.Helper()
	select {
	case ex := <-reg.exits:
		if ex.Recorded != nil {
			ex.Recorded() // as the engine does once the store has it
		}
		return ex
	case <-time.After(10 * time.Second):
		t.Fatal("no exit within 10s")
	}
	return job.Exit{}
}

func TestAgentEndpointChecksTheToken(t *testing.T) {
	_, srv, reg := startHub(t, false)
	off := httptest.NewServer(New(Config{}, reg, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer off.Close()
	tests := []struct {
		name   string
		server string
		auth   string
		status int
		hint   string
	}{
		{"agents off", off.URL, "Bearer " + testAgentToken, 404, "--agent-token"},
		{"no token", srv.URL, "", 401, "agent token"},
		{"wrong token", srv.URL, "Bearer nope", 401, "agent token"},
		{"token of the wrong kind", srv.URL, "Basic " + testAgentToken, 401, "agent token"},
		{"right token, but not a websocket", srv.URL, "Bearer " + testAgentToken, 400, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tc.server+wire.Path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.hint) {
				t.Errorf("status %d body %q; want %d naming %q", resp.StatusCode, body, tc.status, tc.hint)
			}
		})
	}
	if h := reg.history(); len(h) != 0 {
		t.Errorf("machines joined without a token: %v", h)
	}
}

func TestRemoteAgentRunsAndStopsJobs(t *testing.T) {
	hub, srv, reg := startHub(t, false)
	startClient(t, srv.URL, nil, "gpu-a")
	n := waitNode(t, reg, "gpu-a")
	ctx := context.Background()

	if devs := n.Devices(); len(devs) != 2 || devs[1].UUID != "GPU-sim-gpu-a-1" || devs[1].MemMiB != 8192 {
		t.Errorf("devices = %+v", devs)
	}
	if cpus, mem := n.Resources(); cpus != 16 || mem != 65536 {
		t.Errorf("resources = %d CPUs, %d MiB", cpus, mem)
	}

	// A command job runs, its output reaches the server, its exit the engine.
	cmd := []string{"sh", "-c", "echo hello from $CUDA_VISIBLE_DEVICES; exit 3"}
	if err := n.Start(ctx, job.Spec{JobID: 1, Run: 1, Command: cmd, GPUs: []int{1}}); err != nil {
		t.Fatal(err)
	}
	if ex := nextExit(t, reg); ex.JobID != 1 || ex.Node != "gpu-a" || ex.ExitCode != 3 {
		t.Errorf("exit = %+v, want job 1 with code 3", ex)
	}
	lp := n.(interface{ LogPath(int64) string }).LogPath(1)
	if b, err := os.ReadFile(lp); err != nil || string(b) != "hello from 1\n" {
		t.Errorf("output on the server = %q, %v", b, err)
	}
	if r := n.Running(); len(r) != 0 {
		t.Errorf("still running after its exit: %v", r)
	}

	// The agent's refusal comes back as the start's error.
	if err := n.Start(ctx, job.Spec{JobID: 2, Run: 1, Command: []string{"true"}, GPUs: []int{5}}); err == nil || !strings.Contains(err.Error(), "no GPU 5") {
		t.Errorf("start on a GPU the machine lacks: %v", err)
	}

	// A simulated job holds memory, which heartbeats report; stop ends it.
	mem := gpu.SimMemory{PersistentMiB: 3000}
	if err := n.Start(ctx, job.Spec{JobID: 3, Run: 1, SimRemaining: time.Hour, Memory: mem, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a sample with job 3", func() bool {
		s := n.Sample(time.Now())
		return len(s) == 2 && s[0].MemUsedMiB == 3000 && len(s[0].Jobs) == 1 && s[0].TempC > 0
	})
	if err := n.Stop(ctx, job.RunRef{Job: 3, Run: 1}); err != nil {
		t.Fatal(err)
	}
	if ex := nextExit(t, reg); ex.JobID != 3 || ex.ExitCode != -1 {
		t.Errorf("stopped job's exit = %+v", ex)
	}
	if hub.owner("gpu-a") == nil {
		t.Error("hub lost its machine")
	}
}

func TestAgentReconnectsAndDeliversExitsOnce(t *testing.T) {
	hub, srv, reg := startHub(t, false)
	startClient(t, srv.URL, nil, "gpu-a")
	n := waitNode(t, reg, "gpu-a")
	cmd := []string{"sh", "-c", "echo before; sleep 0.3; echo after"}
	if err := n.Start(context.Background(), job.Spec{JobID: 7, Run: 1, Command: cmd, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	// The network drops while the job runs.
	hub.owner("gpu-a").ws.Close()
	waitUntil(t, "the machine to leave and join again", func() bool {
		h := reg.history()
		return len(h) >= 3 && h[1] == "remove gpu-a" && strings.HasPrefix(h[2], "add gpu-a")
	})
	// It joined again reporting the job, running or ended but unreported.
	if h := reg.history(); h[2] != "add gpu-a [job 7 run 1]" {
		t.Errorf("rejoin = %q, want it to report job 7", h[2])
	}
	if ex := nextExit(t, reg); ex.JobID != 7 || ex.ExitCode != 0 {
		t.Errorf("exit = %+v", ex)
	}
	select {
	case ex := <-reg.exits:
		t.Errorf("second exit: %+v", ex)
	case <-time.After(300 * time.Millisecond):
	}
	lp := reg.node("gpu-a").(*remoteNode).LogPath(7)
	if b, _ := os.ReadFile(lp); string(b) != "before\nafter\n" {
		t.Errorf("output across the reconnection = %q", b)
	}
}

// rawAgent is a hand-driven agent connection.
func rawAgent(t testing.TB, srv *httptest.Server, hello wire.Hello) (*websocket.Conn, *wire.Message, error) {
	t.Helper()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + wire.Path
	ws, _, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + testAgentToken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if err := ws.WriteJSON(wire.Message{Type: wire.TypeHello, Hello: &hello}); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var m wire.Message
	err = ws.ReadJSON(&m)
	return ws, &m, err
}

func helloFor(names ...string) wire.Hello {
	h := wire.Hello{Version: wire.Version, Agent: "test"}
	for _, n := range names {
		h.Nodes = append(h.Nodes, wire.Node{Name: n, CPUs: 8, MemMiB: 1024, GPUs: []wire.GPU{{Index: 0, UUID: "GPU-" + n, Model: "X", MemMiB: 1024}}})
	}
	return h
}

func TestHubRefusesBadHellos(t *testing.T) {
	hello := func(edit func(*wire.Hello)) wire.Hello {
		h := helloFor("n1")
		edit(&h)
		return h
	}
	tests := []struct {
		name  string
		hello wire.Hello
		hint  string
	}{
		{"another protocol version", hello(func(h *wire.Hello) { h.Version = 99 }), "version 99"},
		{"no machines", hello(func(h *wire.Hello) { h.Nodes = nil }), "no machines"},
		{"a name that is a path", hello(func(h *wire.Hello) { h.Nodes[0].Name = "../x" }), "node name"},
		{"one machine twice", hello(func(h *wire.Hello) { h.Nodes = append(h.Nodes, h.Nodes[0]) }), "twice"},
		{"GPU indexes with a gap", hello(func(h *wire.Hello) { h.Nodes[0].GPUs[0].Index = 1 }), "index"},
		{"the name of the server's own machine", helloFor("local-0"), "another --name"},
		{"an address with a port", hello(func(h *wire.Hello) { h.Nodes[0].Addr = "10.0.0.1 x" }), "address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, srv, reg := startHub(t, false)
			local, err := agent.New(agent.Config{Name: "local-0", Backend: gpu.NewSim("local-0", 1, 1024), WorkDir: t.TempDir()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = reg.AddNode(context.Background(), local)
			_, _, err = rawAgent(t, srv, tc.hello)
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, tc.hint) {
				t.Errorf("answer: %v; want a close naming %q", err, tc.hint)
			}
			if h := reg.history(); len(h) != 1 {
				t.Errorf("registry changed: %v", h)
			}
		})
	}
}

// A machine's address for the rendezvous of jobs on several machines is
// the one its agent reports (the local address of its connection, or
// --advertise-addr), else where its connection comes from.
func TestMachineAddress(t *testing.T) {
	_, srv, reg := startHub(t, false)
	startClient(t, srv.URL, nil, "gpu-a")
	if got := waitNode(t, reg, "gpu-a").(engine.AddrNode).Addr(); got != "127.0.0.1" {
		t.Errorf("reported address %q, want 127.0.0.1 (the client's side of its connection)", got)
	}
	h := helloFor("old", "told")
	h.Nodes[1].Addr = "gpu-told.lab"
	if _, m, err := rawAgent(t, srv, h); err != nil || m.Type != wire.TypeWelcome {
		t.Fatalf("hello: %v, %+v", err, m)
	}
	for name, want := range map[string]string{"old": "127.0.0.1", "told": "gpu-told.lab"} {
		if got := waitNode(t, reg, name).(engine.AddrNode).Addr(); got != want {
			t.Errorf("%s: address %q, want %q", name, got, want)
		}
	}
}

func TestSilentAgentIsDisconnected(t *testing.T) {
	_, srv, reg := startHub(t, false)
	_, m, err := rawAgent(t, srv, helloFor("quiet"))
	if err != nil || m.Type != wire.TypeWelcome || m.Welcome.HeartbeatTimeoutMS != 600 {
		t.Fatalf("welcome: %+v, %v", m, err)
	}
	waitNode(t, reg, "quiet")
	// Nothing more is sent, and pings are not answered (nothing reads).
	start := time.Now()
	waitUntil(t, "the silent machine to be removed", func() bool { return reg.node("quiet") == nil })
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("removed after %v, before the heartbeat timeout", d)
	}
}

func TestNewConnectionTakesOverAMachine(t *testing.T) {
	_, srv, reg := startHub(t, false)
	old, _, err := rawAgent(t, srv, helloFor("gpu-a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, m, err := rawAgent(t, srv, helloFor("gpu-a")); err != nil || m.Type != wire.TypeWelcome {
		t.Fatalf("second connection: %+v, %v", m, err)
	}
	// The old connection is closed, and its end removes nothing.
	_ = old.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ce *websocket.CloseError
	if _, _, err := old.ReadMessage(); !errors.As(err, &ce) || !strings.Contains(ce.Text, "taken over") {
		t.Errorf("old connection: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	want := []string{"add gpu-a []", "remove gpu-a", "add gpu-a []"}
	if h := reg.history(); !slices.Equal(h, want) {
		t.Errorf("history = %q, want %q", h, want)
	}
}

func TestAgentConnectsOverTLS(t *testing.T) {
	_, srv, reg := startHub(t, true)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	startClient(t, srv.URL, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, "gpu-tls")
	n := waitNode(t, reg, "gpu-tls")
	if err := n.Start(context.Background(), job.Spec{JobID: 1, Run: 1, Command: []string{"true"}, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	if ex := nextExit(t, reg); ex.ExitCode != 0 {
		t.Errorf("exit over TLS = %+v", ex)
	}
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Errorf("server URL %s is not https", srv.URL)
	}
}

func TestUnansweredStartFailsAsDisconnectedAndIsStopped(t *testing.T) {
	hub, srv, reg := startHub(t, false)
	hub.cfg.AckTimeout = 200 * time.Millisecond
	ws, _, err := rawAgent(t, srv, helloFor("mute"))
	if err != nil {
		t.Fatal(err)
	}
	n := waitNode(t, reg, "mute")
	// The agent reads but never answers.
	got := make(chan wire.Type, 4)
	go func() {
		for {
			var m wire.Message
			if err := ws.ReadJSON(&m); err != nil {
				close(got)
				return
			}
			got <- m.Type
		}
	}()
	err = n.Start(context.Background(), job.Spec{JobID: 4, Run: 1, Command: []string{"true"}, GPUs: []int{0}})
	if !errors.Is(err, job.ErrDisconnected) || !strings.Contains(err.Error(), "start job 4 run 1 on mute") {
		t.Fatalf("Start = %v; want ErrDisconnected", err)
	}
	// In case it started after all, it is told to stop.
	for _, want := range []wire.Type{wire.TypeStart, wire.TypeStop} {
		select {
		case typ := <-got:
			if typ != want {
				t.Errorf("agent got %q, want %q", typ, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("agent never got %q", want)
		}
	}
	if r := n.Running(); len(r) != 0 {
		t.Errorf("running after a failed start: %v", r)
	}
}

func TestRemoteOutputIsKeptAtItsOffsets(t *testing.T) {
	hub, _, _ := startHub(t, false)
	c := &agentConn{hub: hub, nodes: map[string]*remoteNode{"n1": {name: "n1"}}}
	tests := []struct {
		name   string
		log    wire.Log
		want   string
		errHas string
	}{
		{"first chunk", wire.Log{Node: "n1", JobID: 3, Offset: 0, Data: []byte("abc")}, "abc", ""},
		{"next chunk", wire.Log{Node: "n1", JobID: 3, Offset: 3, Data: []byte("def")}, "abcdef", ""},
		{"a repeated chunk changes nothing", wire.Log{Node: "n1", JobID: 3, Offset: 1, Data: []byte("bcd")}, "abcdef", ""},
		{"another connection's machine", wire.Log{Node: "n2", JobID: 3, Data: []byte("x")}, "abcdef", "unknown machine"},
		// Chunks the server could not keep (its disk was full) leave a
		// marker of their length, and later bytes keep their offsets.
		{"a chunk past the end marks the gap", wire.Log{Node: "n1", JobID: 3, Offset: 99, Data: []byte("x")}, "abcdef" + joboutput.Marker(93) + "x", ""},
	}
	for _, tc := range tests {
		err := c.writeLog(&tc.log)
		if (tc.errHas == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.errHas)
		}
		if b, _ := os.ReadFile(hub.logPath("n1", 3)); string(b) != tc.want {
			t.Errorf("%s: output = %q, want %q", tc.name, b, tc.want)
		}
	}
}

// TestDropClosesAgentsAndTakesNoMore: a server that steps down drops its
// agents, whose machines leave, and refuses them (503, try another
// server) until it accepts agents again, when they come back.
func TestDropClosesAgentsAndTakesNoMore(t *testing.T) {
	h, srv, reg := startHub(t, false)
	startClient(t, srv.URL, nil, "gpu-a")
	waitNode(t, reg, "gpu-a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if reg.node("gpu-a") != nil {
		t.Fatal("gpu-a still registered after Drop")
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+wire.Path, nil)
	req.Header.Set("Authorization", "Bearer "+testAgentToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "no longer leads") {
		t.Errorf("an agent after Drop: %d %s; want 503 saying the server no longer leads", resp.StatusCode, body)
	}
	h.Accept()
	waitNode(t, reg, "gpu-a")
}
