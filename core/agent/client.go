package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/joboutput"
)

// ClientConfig sets up a Client.
type ClientConfig struct {
	// Server is the server's base URL: http://host:port or https://host
	// (a path prefix is kept; ws:// and wss:// are accepted too). The
	// URLs of several server replicas may be given, comma-separated: the
	// client connects to whichever accepts it, the leader (servers.go).
	Server string
	// Token is the agent token the server was started with
	// (serve --agent-token).
	Token string
	// Name names this agent in the server's logs; default: the host name.
	Name string
	// Nodes are the machines this agent runs. Each reports job exits on
	// Exits.
	Nodes []*Local
	Exits <-chan job.Exit
	// TLS configures connections to an https server; nil trusts the
	// system's certificate authorities.
	TLS    *tls.Config
	Logger *slog.Logger
	// SampleEvery is the time between heartbeats, each carrying a sample
	// of every GPU; default 1s.
	SampleEvery time.Duration
	// LogEvery is how often new job output is sent; default 500ms.
	LogEvery time.Duration
	// MinBackoff and MaxBackoff bound the wait between connection
	// attempts, which doubles after each failed one; default 500ms and 15s.
	MinBackoff, MaxBackoff time.Duration
	// Watchdog, when set, gets a lease each time a server is heard: the
	// heartbeat timeout from then (watchdog.go, fence.go).
	Watchdog *WatchdogLink
	// AdvertiseAddr is the address the other machines reach this agent's
	// machines at, for the rendezvous of jobs on several machines
	// (job.Gang): a host name or IP address. Empty: the local address of
	// the connection to the server.
	AdvertiseAddr string
}

// Client connects Local agents to a remote server: it registers their
// machines, runs the jobs the server starts, and forwards heartbeats with
// GPU samples, job output and job exits. It reconnects with exponential
// backoff whenever the connection drops, and reports the jobs still
// running (or whose exits the server has not acknowledged) each time, so
// nothing is lost across disconnections and server restarts.
type Client struct {
	cfg  ClientConfig
	urls []string // agent endpoints, one per server replica
	// tunnelClient opens tunnels to sessions (tunnel.go).
	tunnelClient *http.Client
	nodes        map[string]*Local
	kick         chan struct{} // an exit waits to be sent

	// joinAgain: the server refused the machines' credentials (its
	// database was replaced, say): present the join token next time.
	joinAgain atomic.Bool

	mu   sync.Mutex
	live map[jobKey]*liveJob // runs the server has not yet seen end

	// heard is when a server was last heard (Unix nanoseconds), and
	// timeout the heartbeat timeout it announced (nanoseconds; 0 before
	// the first welcome): see fence.go.
	heard   atomic.Int64
	timeout atomic.Int64
	// fencedSpans are the recent silences longer than the timeout, from
	// when fencing began to when a server was heard again.
	fmu         sync.Mutex
	fencedSpans [][2]time.Time
}

type jobKey struct {
	node string
	job  int64
}

// liveJob is a run that the server has not yet seen end.
type liveJob struct {
	run  int64     // the run's number
	sent int64     // bytes of the job's output sent to the server
	exit *job.Exit // how the run ended; nil while it runs
	// exitID is the ID of the exit message on the current connection; 0
	// when not yet sent on it.
	exitID uint64
	gpus   []int // the machine's GPUs the run holds; nil when unknown
	// outputLost: the run's output could not be read (a job put a link
	// in its place); said once.
	outputLost bool
}

// NewClient checks cfg and returns a client; Run connects it.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Token == "" && !allJoined(cfg.Nodes) {
		return nil, errors.New("agent client: no token: give the server's join token (a machine that joined before uses its credential)")
	}
	if len(cfg.Nodes) == 0 || cfg.Exits == nil {
		return nil, errors.New("agent client: no nodes or no exits channel")
	}
	urls, err := agentURLs(cfg.Server)
	if err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = time.Second
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = 500 * time.Millisecond
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(cfg.MinBackoff, 15*time.Second)
	}
	c := &Client{
		cfg: cfg, urls: urls, nodes: make(map[string]*Local),
		kick: make(chan struct{}, 1), live: make(map[jobKey]*liveJob), tunnelClient: newTunnelClient(cfg),
	}
	for _, n := range cfg.Nodes {
		if err := wire.CheckNodeName(n.Name()); err != nil {
			return nil, fmt.Errorf("agent client: %w", err)
		}
		if _, dup := c.nodes[n.Name()]; dup {
			return nil, fmt.Errorf("agent client: two nodes named %q", n.Name())
		}
		c.nodes[n.Name()] = n
	}
	for _, n := range cfg.Nodes {
		exits, err := n.keptExits()
		if err != nil {
			return nil, fmt.Errorf("agent client: %w", err)
		}
		for _, ex := range exits {
			cfg.Logger.Info("resending a job exit kept by an earlier agent", "job", ex.JobID, "run", ex.Run, "node", ex.Node)
			c.addExit(ex)
		}
	}
	return c, nil
}

// allJoined reports whether every machine has its credential.
func allJoined(nodes []*Local) bool {
	for _, n := range nodes {
		if n.credential() == "" {
			return false
		}
	}
	return len(nodes) > 0
}

// bearer is the token the client presents: the join token while a machine
// has yet to join, a machine credential once all have.
func (c *Client) bearer() string {
	if c.cfg.Token != "" && !allJoined(c.cfg.Nodes) {
		return c.cfg.Token
	}
	if allJoined(c.cfg.Nodes) && !(c.joinAgain.Load() && c.cfg.Token != "") {
		return c.cfg.Nodes[0].credential()
	}
	return c.cfg.Token
}

// agentURL turns a server's base URL into its agent endpoint.
func agentURL(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", fmt.Errorf("agent client: server URL: %w", err)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("agent client: server URL %q: want http:// or https://", u.Redacted())
	}
	if u.Host == "" {
		return "", fmt.Errorf("agent client: server URL %q has no host", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + wire.Path
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// Run connects to the server and serves it until ctx ends, reconnecting
// after each disconnection. Call it once.
func (c *Client) Run(ctx context.Context) error {
	go c.collectExits(ctx)
	go c.fence(ctx)
	backoff := c.cfg.MinBackoff
	for attempt := 0; ; attempt++ {
		url := c.urls[attempt%len(c.urls)]
		welcomed, err := c.session(ctx, url)
		if ctx.Err() != nil {
			return nil
		}
		if welcomed {
			backoff = c.cfg.MinBackoff
		}
		// Jitter keeps a fleet of agents from reconnecting in step.
		wait := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		if r := c.leaseRetry(); r > 0 {
			// The runs are still leased: a server restart is costing
			// them their lease, so try again soon, not after a backoff.
			wait = time.Duration(float64(r) * (0.8 + 0.4*rand.Float64()))
		}
		args := []any{"server", url, "err", err, "in", wait.Round(time.Millisecond)}
		if h := c.heard.Load(); h != 0 {
			// When a server was last heard: the runs' lease (fence.go)
			// runs out a heartbeat timeout after it.
			args = append(args, "heard", time.Unix(0, h))
		}
		c.cfg.Logger.Warn("not connected to the server; retrying", args...)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		// With several servers, the wait grows once all have been tried.
		if (attempt+1)%len(c.urls) == 0 {
			backoff = min(2*backoff, c.maxBackoff())
		}
	}
}

// collectExits records each run's end until the server acknowledges it.
func (c *Client) collectExits(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ex := <-c.cfg.Exits:
			if ex.ExitCode != 0 && !ex.Infra && ex.EndedAs == "" && c.fencedAt(ex.At, c.graceOf(ex.Node)) {
				// Stopped because no server was heard (fence.go), by the
				// agent or its watchdog: not the job's fault.
				ex.Infra, ex.Err = true, fencedErr
			}
			c.cfg.Logger.Info("job ended", "job", ex.JobID, "run", ex.Run, "node", ex.Node, "code", ex.ExitCode, "err", ex.Err)
			// Kept on disk until the server acknowledges it, so that an
			// agent restart does not lose it.
			if n := c.nodes[ex.Node]; n != nil {
				if err := n.keepExit(ex); err != nil {
					c.cfg.Logger.Error("keep a job exit on disk", "job", ex.JobID, "run", ex.Run, "err", err)
				}
			}
			c.addExit(ex)
		}
	}
}

// addExit records how a run ended, to be sent until the server
// acknowledges it.
func (c *Client) addExit(ex job.Exit) {
	c.mu.Lock()
	k := jobKey{ex.Node, ex.JobID}
	lj := c.live[k]
	if lj == nil || lj.run != ex.Run {
		lj = &liveJob{run: ex.Run}
		c.live[k] = lj
	}
	lj.exit, lj.exitID = &ex, 0
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// session is one connection to the server.
type session struct {
	c       *Client
	conn    *websocket.Conn
	url     string        // the agent endpoint it connected to
	addr    string        // the address reported for the machines (wire.Node.Addr)
	timeout time.Duration // silence after which the server is taken for lost
	// welcomed: registered; from then a message or ping read after a
	// silence longer than the timeout ends the session (heard).
	welcomed bool

	wmu    sync.Mutex // one writer at a time
	nextID atomic.Uint64

	// inflight maps the IDs of exit messages sent on this connection to
	// their runs; guarded by c.mu.
	inflight map[uint64]jobKey
}

// writeWait bounds one write to the server.
const writeWait = 10 * time.Second

// session connects, registers and serves until the connection ends. It
// reports whether the server accepted the registration.
func (c *Client) session(ctx context.Context, url string) (welcomed bool, err error) {
	dialer := websocket.Dialer{
		Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 15 * time.Second,
		TLSClientConfig: c.cfg.TLS,
	}
	hdr := http.Header{"Authorization": {"Bearer " + c.bearer()}}
	conn, resp, err := dialer.DialContext(ctx, url, hdr)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			c.joinAgain.Store(resp.StatusCode == http.StatusUnauthorized)
			return false, fmt.Errorf("connect: server answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		return false, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	conn.SetReadLimit(wire.MaxMessageBytes)
	s := &session{c: c, conn: conn, url: url, inflight: make(map[uint64]jobKey), addr: c.cfg.AdvertiseAddr}
	if s.addr == "" {
		s.addr = hostOf(conn.LocalAddr())
	}
	// Registration waits for the server; ending ctx ends the wait.
	stopClosing := context.AfterFunc(ctx, func() { conn.Close() })
	err = s.register()
	if !stopClosing() || err != nil {
		return false, errors.Join(err, ctx.Err())
	}
	c.cfg.Logger.Info("connected to the server", "server", url, "nodes", len(c.nodes))

	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		<-sctx.Done()
		if ctx.Err() != nil {
			_ = conn.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseGoingAway, "agent shutting down"), time.Now().Add(time.Second))
		}
		conn.Close() // ends the read below
	}()
	go func() { defer wg.Done(); s.heartbeats(sctx) }()
	go func() { defer wg.Done(); s.pump(sctx) }()
	err = s.read(sctx)
	cancel()
	wg.Wait()
	return true, err
}

// register sends Hello and waits for Welcome.
func (s *session) register() error {
	c := s.c
	hello := &wire.Hello{Version: wire.Version, Agent: c.cfg.Name}
	c.mu.Lock()
	for _, n := range c.cfg.Nodes {
		cpus, mem := n.Resources()
		wn := wire.Node{Name: n.Name(), CPUs: cpus, MemMiB: mem, GPUs: wire.FromDevices(n.Devices()), Running: []job.RunRef{},
			Monitor: n.MonitorOnly(), Credential: n.credential(), Addr: s.addr}
		for k, lj := range c.live {
			if k.node == n.Name() {
				wn.Running = append(wn.Running, job.RunRef{Job: k.job, Run: lj.run})
				if lj.gpus != nil {
					wn.RunningGPUs = append(wn.RunningGPUs, wire.JobGPUs{JobID: k.job, Run: lj.run, GPUs: lj.gpus})
				}
			}
		}
		hello.Nodes = append(hello.Nodes, wn)
	}
	c.mu.Unlock()
	if err := s.send(&wire.Message{Type: wire.TypeHello, Hello: hello}); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	// Until the server says otherwise.
	s.timeout = 30 * time.Second
	// The server pings more often than its timeout; each ping shows it is
	// alive.
	s.conn.SetPingHandler(func(data string) error {
		if err := s.heard(); err != nil {
			return err
		}
		_ = s.conn.SetReadDeadline(time.Now().Add(s.timeout))
		err := s.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeWait))
		var ne net.Error
		if errors.Is(err, websocket.ErrCloseSent) || errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return err
	})
	_ = s.conn.SetReadDeadline(time.Now().Add(s.timeout))
	var m wire.Message
	if err := s.conn.ReadJSON(&m); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if m.Type != wire.TypeWelcome || m.Welcome == nil {
		return fmt.Errorf("register: server answered %q, not welcome", m.Type)
	}
	if m.Welcome.Version != wire.Version {
		return fmt.Errorf("register: server speaks protocol version %d, this agent %d", m.Welcome.Version, wire.Version)
	}
	for _, nc := range m.Welcome.Credentials {
		n := c.nodes[nc.Node]
		if n == nil {
			continue
		}
		if err := n.saveCredential(nc.Credential); err != nil {
			return fmt.Errorf("register: %w", err)
		}
		c.cfg.Logger.Info("machine joined the cluster: its credential is kept in its work folder", "node", nc.Node)
	}
	s.timeout = time.Duration(m.Welcome.HeartbeatTimeoutMS) * time.Millisecond
	if s.timeout < 3*c.cfg.SampleEvery {
		s.timeout = 3 * c.cfg.SampleEvery
	}
	c.timeout.Store(int64(s.timeout))
	c.hear()
	s.welcomed = true
	offsets := make(map[jobKey]int64, len(m.Welcome.Logs))
	for _, l := range m.Welcome.Logs {
		offsets[jobKey{l.Node, l.JobID}] = l.Offset
	}
	c.mu.Lock()
	for k, lj := range c.live {
		// The server holds this much of the output; a run's exit is sent
		// again on every new connection until acknowledged.
		lj.sent, lj.exitID = offsets[k], 0
	}
	c.mu.Unlock()
	return nil
}

// send writes one message.
func (s *session) send(m *wire.Message) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(writeWait))
	return s.conn.WriteJSON(m)
}

// read handles the server's messages until the connection ends.
func (s *session) read(ctx context.Context) error {
	for {
		_ = s.conn.SetReadDeadline(time.Now().Add(s.timeout))
		var m wire.Message
		if err := s.conn.ReadJSON(&m); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("read: %w", err)
		}
		if err := m.Check(); err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if err := s.heard(); err != nil {
			return err
		}
		switch m.Type {
		case wire.TypeStart:
			s.answer(m.ID, s.start(ctx, m.Start))
		case wire.TypeStop:
			s.answer(m.ID, s.stop(ctx, m.Stop))
		case wire.TypeResize:
			s.answer(m.ID, s.resize(ctx, m.Resize))
		case wire.TypeDial:
			// A tunnel takes a connection back to the server: the
			// messages behind it do not wait.
			go func(id uint64, d *wire.Dial) { s.answer(id, s.dial(ctx, d)) }(m.ID, m.Dial)
		case wire.TypeAck:
			s.acked(m.ID, m.Ack)
		default:
			s.c.cfg.Logger.Warn("unexpected message from the server", "type", m.Type)
		}
	}
}

// errStale ends a session that read a message after a silence longer
// than the heartbeat timeout.
var errStale = errors.New("read: no server heard for longer than the heartbeat timeout: what this connection holds may have been sent before the server took its machines for lost")

// heard records that the server was heard, as a message or a ping was
// read, unless the session had gone silent for longer than the heartbeat
// timeout (fencing): then what the connection still held may have waited
// in it since before the server took the machines for lost and gave
// their runs to others, and the session ends instead, unread. A frozen
// agent (SIGSTOP) thawed 40 s later read a start sent before its freeze
// as new, renewed its lease by it and started the run, 8 s after the
// server had started it elsewhere (issue 32's fault soak, seed 21). The
// next session registers afresh (register hears the welcome).
func (s *session) heard() error {
	if s.welcomed && s.c.fencing() {
		return errStale
	}
	s.c.hear()
	return nil
}

// answer acknowledges request id.
func (s *session) answer(id uint64, err error) {
	ack := wire.AckError(err)
	if err := s.send(&wire.Message{Type: wire.TypeAck, ID: id, Ack: ack}); err != nil {
		s.c.cfg.Logger.Warn("answer the server", "err", err)
	}
}

// start begins a run the server asks for.
func (s *session) start(ctx context.Context, st *wire.Start) error {
	c := s.c
	n := c.nodes[st.Node]
	if n == nil {
		return fmt.Errorf("no node %q on this agent", st.Node)
	}
	spec := st.Job.Spec()
	if cp := spec.Checkpoint; cp != nil {
		// The copy comes from the server that sent the start.
		cp.Fetch = func(ctx context.Context) (io.ReadCloser, error) {
			return fetchCheckpoint(ctx, c.tunnelClient, s.url, cp.Token)
		}
	}
	k := jobKey{st.Node, spec.JobID}
	lj := &liveJob{run: spec.Run, sent: st.LogOffset, gpus: append([]int{}, spec.GPUs...)}
	c.mu.Lock()
	if old := c.live[k]; old != nil && old.exit == nil {
		c.mu.Unlock()
		return fmt.Errorf("start run %d of job %d on %s: %w (run %d)", spec.Run, spec.JobID, st.Node, job.ErrBusy, old.run)
	}
	if old := c.live[k]; old != nil {
		n.dropExit(job.RunRef{Job: k.job, Run: old.run})
	}
	// An unacknowledged exit of an earlier run is dropped: the server
	// starting the job again has given that run up.
	c.live[k] = lj
	c.mu.Unlock()
	if err := n.Start(ctx, spec); err != nil {
		c.mu.Lock()
		if c.live[k] == lj {
			delete(c.live, k)
		}
		c.mu.Unlock()
		c.cfg.Logger.Warn("job failed to start", "job", spec.JobID, "node", st.Node, "err", err)
		return err
	}
	c.cfg.Logger.Info("job started", "job", spec.JobID, "node", st.Node, "gpus", spec.GPUs)
	return nil
}

// stop ends a run the server asks to stop.
func (s *session) stop(ctx context.Context, st *wire.Stop) error {
	n := s.c.nodes[st.Node]
	if n == nil {
		return fmt.Errorf("no node %q on this agent", st.Node)
	}
	s.c.cfg.Logger.Info("stopping job", "job", st.JobID, "run", st.Run, "node", st.Node)
	return n.Stop(ctx, job.RunRef{Job: st.JobID, Run: st.Run})
}

// acked drops the run whose exit the server acknowledged.
func (s *session) acked(id uint64, ack *wire.Ack) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := s.inflight[id]
	if !ok {
		return
	}
	delete(s.inflight, id)
	if ack.Error != "" {
		c.cfg.Logger.Warn("server refused a job exit", "job", k.job, "node", k.node, "err", ack.Error)
	}
	if lj := c.live[k]; lj != nil && lj.exitID == id {
		delete(c.live, k)
		if n := c.nodes[k.node]; n != nil {
			n.dropExit(job.RunRef{Job: k.job, Run: lj.run})
		}
	}
}

// heartbeats sends every GPU's sample every SampleEvery.
func (s *session) heartbeats(ctx context.Context) {
	tick := time.NewTicker(s.c.cfg.SampleEvery)
	defer tick.Stop()
	for {
		if err := s.beat(); err != nil {
			s.conn.Close()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// beat sends one heartbeat with every GPU's sample.
func (s *session) beat() error {
	hb := &wire.Heartbeat{}
	now := time.Now()
	for _, n := range s.c.cfg.Nodes {
		hb.Nodes = append(hb.Nodes, wire.NodeSamples{Node: n.Name(), Samples: wire.FromSamples(n.Sample(now)),
			Lanes: wire.FromLanes(n.Lanes()), Usage: wire.FromUsage(n.JobUsage(now))})
	}
	return s.send(&wire.Message{Type: wire.TypeHeartbeat, Heartbeat: hb})
}

// pump sends new job output every LogEvery, and each run's exit after the
// last of its output.
func (s *session) pump(ctx context.Context) {
	tick := time.NewTicker(s.c.cfg.LogEvery)
	defer tick.Stop()
	for {
		if err := s.pumpOnce(); err != nil {
			s.c.cfg.Logger.Warn("send job output", "err", err)
			s.conn.Close()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.c.kick:
		}
	}
}

// logChunksPerPass bounds how much of one job's output goes in one pass,
// so that a chatty job does not hold up the others.
const logChunksPerPass = 4

func (s *session) pumpOnce() error {
	c := s.c
	type todo struct {
		k    jobKey
		lj   *liveJob
		sent int64
		exit *job.Exit // the run ended and its exit is not yet sent
	}
	c.mu.Lock()
	var work []todo
	for k, lj := range c.live {
		if lj.exit != nil && lj.exitID != 0 {
			continue // all sent; waiting for the server's ack
		}
		w := todo{k: k, lj: lj, sent: lj.sent}
		if lj.exit != nil {
			w.exit = lj.exit
		}
		work = append(work, w)
	}
	c.mu.Unlock()
	for _, w := range work {
		n := c.nodes[w.k.node]
		if n == nil {
			continue
		}
		limit := logChunksPerPass
		if w.exit != nil {
			limit = -1 // all of it, before the exit
		}
		sent, err := s.sendLog(n, w.k, w.sent, limit)
		if err != nil {
			return err
		}
		var m *wire.Message
		c.mu.Lock()
		// The entry may have been replaced meanwhile by a new run.
		if c.live[w.k] == w.lj {
			w.lj.sent = sent
			if w.exit != nil && w.lj.exit == w.exit && w.lj.exitID == 0 {
				we := wire.FromExit(*w.exit)
				m = &wire.Message{Type: wire.TypeExit, ID: s.nextID.Add(1), Exit: &we}
				// Recorded before sending, so the ack finds it.
				w.lj.exitID = m.ID
				s.inflight[m.ID] = w.k
			}
		}
		c.mu.Unlock()
		if m == nil {
			continue
		}
		// The GPUs' latest readings go first, so that the server judges
		// the exit knowing whether a GPU failed (XID, ECC) meanwhile.
		if err := s.beat(); err != nil {
			return err
		}
		if err := s.send(m); err != nil {
			return err
		}
	}
	return nil
}

// sendLog sends a job's output from offset on, in up to limit chunks
// (limit < 0: all of it), and returns the new offset.
func (s *session) sendLog(n *Local, k jobKey, offset int64, limit int) (int64, error) {
	f, err := joboutput.Open(n.LogPath(k.job))
	if errors.Is(err, os.ErrNotExist) {
		return offset, nil
	}
	if err != nil {
		// A job that swapped its output for a link or a FIFO loses it;
		// the connection and the other jobs' output go on. Said once.
		s.c.mu.Lock()
		lj := s.c.live[k]
		first := lj != nil && !lj.outputLost
		if first {
			lj.outputLost = true
		}
		s.c.mu.Unlock()
		if first {
			s.c.cfg.Logger.Warn("job output not sent", "job", k.job, "node", k.node, "err", err)
		}
		return offset, nil
	}
	defer f.Close()
	buf := make([]byte, wire.MaxLogChunk)
	for i := 0; limit < 0 || i < limit; i++ {
		nr, err := f.ReadAt(buf, offset)
		if nr > 0 {
			m := &wire.Message{Type: wire.TypeLog, Log: &wire.Log{Node: k.node, JobID: k.job, Offset: offset, Data: buf[:nr]}}
			if err := s.send(m); err != nil {
				return offset, err
			}
			offset += int64(nr)
		}
		if errors.Is(err, io.EOF) || nr == 0 {
			return offset, nil
		}
		if err != nil {
			return offset, fmt.Errorf("job %d output: %w", k.job, err)
		}
	}
	return offset, nil
}

// hostOf is the host of a connection's address, without its port.
func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
