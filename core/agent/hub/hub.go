// Package hub is the server's half of the agent protocol (the agent's is
// core/agent; the protocol, core/agent/wire): remote node agents connect
// to a Hub, which checks their tokens and machines' credentials, adds
// their machines to the engine as engine.Nodes (or as monitors), drives
// them (start, stop, resize), keeps their jobs' output, and hands their
// runs' exits to the engine, acknowledging each once it is stored. The
// web server only mounts the Hub's HTTP handler.
package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/joboutput"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/ratelimit"
)

// Config sets up the endpoint where remote node agents connect
// (gpuportal agent; protocol in core/agent/wire).
type Config struct {
	// Token is the agent token; empty turns remote agents off.
	Token string
	// HeartbeatTimeout is how long an agent may stay silent before the
	// server drops its connection and disconnects its machines; default 30s.
	HeartbeatTimeout time.Duration
	// Dir keeps the output of remote jobs: Dir/NODE/jobs/ID/output.log,
	// the layout of the in-process agents' work folders.
	Dir string
	// AckTimeout bounds the wait for an agent to answer a start or stop;
	// default 10s.
	AckTimeout time.Duration
	// Machines, when set, gives machines their identity: agents join with
	// a join token (or Token) and each machine gets a credential of its
	// own (identity.go). Nil: any agent with Token may name any machine.
	Machines MachineStore
	// CheckpointDir keeps the copies of jobs' checkpoint folders
	// (checkpoints.go); "": no copies. CheckpointMax is the largest folder
	// copied, in bytes of files; 0: DefaultCheckpointMax; negative: none.
	CheckpointDir string
	CheckpointMax int64
	// Jobs tells which jobs have ended, whose copies go; nil: copies stay.
	Jobs JobStates
}

// JobStates tells which jobs have ended, and as whom a job runs.
type JobStates interface {
	// Ended returns those of ids that have ended (or are gone).
	Ended(ctx context.Context, ids []int64) ([]int64, error)
	// Account is the Unix account job id runs as (job.Spec.Account).
	Account(ctx context.Context, id int64) (string, error)
}

// Registry is the part of the engine that agents' machines join.
// *engine.Engine implements it.
type Registry interface {
	AddNode(ctx context.Context, n engine.Node) error
	RemoveNode(ctx context.Context, name string) error
	Nodes() []engine.Node
	Exits() chan<- job.Exit
}

// Hub accepts agent connections and registers their machines. Create it
// with New and serve it at wire.Path.
type Hub struct {
	cfg      Config
	registry Registry
	log      *slog.Logger
	upgrader websocket.Upgrader

	// reg serializes adding and removing machines, so that a connection
	// that ends never removes a machine a newer connection has taken over.
	reg sync.Mutex

	mu     sync.Mutex
	owners map[string]*agentConn // machine name -> the connection that runs it
	// tunnels wait for agents' connections to sessions (tunnel.go).
	tunnels tunnels

	heartbeats atomic.Int64 // heartbeats received, for /metrics

	badTokens *ratelimit.Limiter // wrong tokens, per client address

	// known are the machines' credentials checked, for a database
	// outage (identity.go); kept in Dir.
	known *knownCredentials

	// dropped: the server stepped down; agents are refused (Drop).
	dropped atomic.Bool

	// copies are the checkpoint copies (checkpoints.go).
	copies *checkpoints
}

// New returns a hub that adds agents' machines to registry.
func New(cfg Config, registry Registry, log *slog.Logger) *Hub {
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = 30 * time.Second
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = 10 * time.Second
	}
	if cfg.CheckpointMax == 0 {
		cfg.CheckpointMax = DefaultCheckpointMax
	}
	return &Hub{
		copies: newCheckpoints(cfg.CheckpointDir, cfg.CheckpointMax, cfg.Jobs, log),
		cfg:    cfg, registry: registry, log: log, owners: make(map[string]*agentConn),
		tunnels:   tunnels{waiting: make(map[string]chan net.Conn)},
		upgrader:  websocket.Upgrader{HandshakeTimeout: 10 * time.Second},
		badTokens: ratelimit.New(agentTokenFailures, agentTokenWindow),
		known:     loadKnown(knownPath(cfg.Dir), log),
	}
}

// knownPath is where a hub keeps its machines' checked credentials: in
// dir, or nowhere without one.
func knownPath(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, knownFile)
}

// ServeHTTP checks the agent token, upgrades to a websocket and serves the
// agent until it disconnects.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case wire.TunnelPath:
		h.serveTunnel(w, r)
		return
	case wire.CheckpointPath:
		h.copies.serveCheckpoint(w, r)
		return
	}
	if h.cfg.Token == "" && h.cfg.Machines == nil {
		writeJSONError(w, http.StatusNotFound, "remote agents are off: start the server with --agent-token")
		return
	}
	if h.dropped.Load() {
		w.Header().Set("Retry-After", "1")
		writeJSONError(w, http.StatusServiceUnavailable, errDropped)
		return
	}
	now := time.Now()
	addr := clientAddr(r.RemoteAddr)
	if blocked, wait := h.badTokens.Blocked(now, addr); blocked {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		writeJSONError(w, http.StatusTooManyRequests, "too many wrong agent tokens from this address: try again later")
		return
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	actx, cancel := context.WithTimeout(r.Context(), h.cfg.HeartbeatTimeout/2)
	auth, err := h.authenticate(actx, token, now)
	cancel()
	if errors.Is(err, errStoreOut) {
		// Not a wrong token: the agent tries again (or the next server).
		h.log.Warn("agent refused for now: its token cannot be checked", "remote", r.RemoteAddr, "err", err)
		w.Header().Set("Retry-After", "1")
		writeJSONError(w, http.StatusServiceUnavailable, errStoreOut.Error())
		return
	}
	if err != nil {
		h.badTokens.Fail(now, addr)
		h.log.Warn("agent refused: missing or wrong agent token", "remote", r.RemoteAddr, "err", err)
		w.Header().Set("WWW-Authenticate", `Bearer realm="gpuportal-agents"`)
		writeJSONError(w, http.StatusUnauthorized, "missing or wrong agent token")
		return
	}
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		h.log.Warn("agent connection: upgrade failed", "remote", r.RemoteAddr, "err", err)
		return // the upgrader has answered
	}
	c := &agentConn{
		hub: h, ws: ws, remote: r.RemoteAddr, auth: auth, pending: make(map[uint64]chan *wire.Ack),
		closed: make(chan struct{}), nodes: make(map[string]*remoteNode), exitSig: make(chan struct{}, 1),
	}
	// The connection outlives no request context of interest: engine
	// calls get their own deadlines.
	c.serve(context.WithoutCancel(r.Context()))
}

// errDropped is what agents hear from a hub whose server stepped down.
const errDropped = "this server no longer leads: agents connect to the leader (give the agent every server: --server URL1,URL2)"

// Drop ends every agent connection and refuses new ones until Accept:
// the server stepped down (another replica leads). The agents reconnect
// to the leader with their runs, or fence them after the heartbeat
// timeout. It returns once their machines have left the registry, or
// ctx ends.
func (h *Hub) Drop(ctx context.Context) error {
	h.dropped.Store(true)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		// Closed again each time: a hello under way at the first may
		// have registered since.
		h.mu.Lock()
		conns := make(map[*agentConn]bool)
		for _, c := range h.owners {
			conns[c] = true
		}
		h.mu.Unlock()
		if len(conns) == 0 {
			// A connection's end removes its machines under reg: once
			// reg is free, the registry has them no more.
			h.reg.Lock()
			h.reg.Unlock()
			return nil
		}
		for c := range conns {
			c.closeWith(websocket.CloseTryAgainLater, errDropped)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agents' machines still connected: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Accept takes agents again after Drop: the server leads again.
func (h *Hub) Accept() { h.dropped.Store(false) }

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// logPath is where the server keeps a remote job's output.
func (h *Hub) logPath(node string, jobID int64) string {
	return filepath.Join(h.cfg.Dir, node, "jobs", strconv.FormatInt(jobID, 10), "output.log")
}

// logSize is how much of a job's output the server holds.
func (h *Hub) logSize(node string, jobID int64) int64 {
	fi, err := os.Stat(h.logPath(node, jobID))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Heartbeats counts the heartbeats received from agents, for /metrics.
func (h *Hub) Heartbeats() int64 { return h.heartbeats.Load() }

// CheckpointCopies are the figures of the copies of jobs' checkpoint
// folders the hub keeps (checkpoints.go), for /metrics.
func (h *Hub) CheckpointCopies() job.CheckpointCopyStats { return h.copies.stats() }

// CheckpointCopiesOf are the copies the hub keeps of job id's checkpoint
// folders, one per part, by part (without tokens).
func (h *Hub) CheckpointCopiesOf(id int64) []job.CheckpointCopy { return h.copies.of(id) }

// HeartbeatAges says, per machine run by a remote agent, how long ago
// its agent's last heartbeat came (since it connected, before the first).
func (h *Hub) HeartbeatAges(now time.Time) map[string]time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]time.Duration, len(h.owners))
	for node, c := range h.owners {
		if at := c.lastBeat.Load(); at > 0 {
			out[node] = now.Sub(time.Unix(0, at))
		}
	}
	return out
}

func (h *Hub) owner(node string) *agentConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.owners[node]
}

// agentConn is one agent's connection.
type agentConn struct {
	hub    *Hub
	ws     *websocket.Conn
	remote string
	agent  string    // the agent's name, from its hello
	auth   agentAuth // what its token proved

	wmu    sync.Mutex // one writer at a time
	nextID atomic.Uint64

	pmu     sync.Mutex
	pending map[uint64]chan *wire.Ack // requests waiting for their ack

	closeOnce sync.Once
	closed    chan struct{} // closed when the connection ends

	nodes map[string]*remoteNode // set by register, then read-only

	lastBeat atomic.Int64 // when the last heartbeat came, Unix nanoseconds

	qmu     sync.Mutex
	exitQ   []queuedExit // exits to hand to the engine, in order
	exitSig chan struct{}
}

type queuedExit struct {
	id uint64
	ex job.Exit
}

// closeWith ends the connection, telling the agent why.
func (c *agentConn) closeWith(code int, reason string) {
	c.closeOnce.Do(func() {
		close(c.closed)
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
		c.ws.Close()
	})
}

// serve runs the connection: registration, then messages until it ends.
func (c *agentConn) serve(ctx context.Context) {
	h := c.hub
	c.ws.SetReadLimit(wire.MaxMessageBytes)
	if err := c.register(ctx); err != nil {
		h.log.Warn("agent refused", "remote", c.remote, "agent", c.agent, "err", err)
		c.closeWith(websocket.ClosePolicyViolation, truncate(err.Error(), 120))
		c.unregister(ctx) // the machines added before the failure
		return
	}
	names := make([]string, 0, len(c.nodes))
	for n := range c.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	h.log.Info("agent connected", "agent", c.agent, "remote", c.remote, "nodes", names)

	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.ping(cctx) }()
	go func() { defer wg.Done(); c.forwardExits(cctx) }()
	err := c.read()
	cancel()
	c.closeWith(websocket.CloseNormalClosure, "")
	wg.Wait()
	h.log.Warn("agent disconnected", "agent", c.agent, "remote", c.remote, "err", err)
	c.unregister(ctx)
}

// register reads the agent's hello, adds its machines to the engine
// (taking over any that another connection ran) and welcomes it.
func (c *agentConn) register(ctx context.Context) (err error) {
	h := c.hub
	_ = c.ws.SetReadDeadline(time.Now().Add(h.cfg.HeartbeatTimeout))
	_, raw, err := c.ws.ReadMessage()
	if err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	// The version first: an agent of another version may not decode.
	var v struct {
		Hello struct {
			Version int    `json:"version"`
			Agent   string `json:"agent"`
		} `json:"hello"`
	}
	if err := json.Unmarshal(raw, &v); err == nil && v.Hello.Version != wire.Version {
		c.agent = v.Hello.Agent
		return fmt.Errorf("agent speaks protocol version %d, the server %d: run the same gpuportal version on both", v.Hello.Version, wire.Version)
	}
	var m wire.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	if m.Type != wire.TypeHello || m.Hello == nil {
		return fmt.Errorf("first message is %q, not hello", m.Type)
	}
	hello := m.Hello
	c.agent = hello.Agent
	if len(hello.Nodes) == 0 {
		return errors.New("hello names no machines")
	}
	for _, n := range hello.Nodes {
		if err := checkNode(n); err != nil {
			return err
		}
		if _, dup := c.nodes[n.Name]; dup {
			return fmt.Errorf("hello names %s twice", n.Name)
		}
		c.nodes[n.Name] = &remoteNode{
			conn: c, name: n.Name, devices: wire.Devices(n.GPUs), cpus: n.CPUs, memMiB: n.MemMiB,
			running: make(map[job.RunRef]bool), monitor: n.Monitor, addr: n.Addr,
		}
		if n.Addr == "" {
			// An agent before wire.Node.Addr: where it connects from.
			c.nodes[n.Name].addr = clientAddr(c.remote)
		}
		for _, ref := range n.Running {
			c.nodes[n.Name].running[ref] = true
		}
		c.nodes[n.Name].runGPUs = runGPUsOf(n)
	}
	// A machine of the same name that is not an agent's (the server's
	// built-in agent) is not taken over.
	for _, n := range h.registry.Nodes() {
		if _, ours := n.(*remoteNode); !ours && c.nodes[n.Name()] != nil && !c.nodes[n.Name()].monitor {
			return fmt.Errorf("a machine named %s is already connected to the server: give this agent another --name", n.Name())
		}
	}

	welcome := &wire.Welcome{Version: wire.Version, HeartbeatTimeoutMS: h.cfg.HeartbeatTimeout.Milliseconds()}
	ictx, cancel := context.WithTimeout(ctx, h.cfg.HeartbeatTimeout/2)
	creds, err := h.identify(ictx, c.auth, hello.Nodes)
	cancel()
	if err != nil {
		return err
	}
	welcome.Credentials = creds
	defer func() {
		if err != nil {
			// The agent never got its credentials: free the names.
			h.unregisterMachines(ctx, creds)
		}
	}()
	for name, rn := range c.nodes {
		for _, ref := range rn.Running() {
			welcome.Logs = append(welcome.Logs, wire.LogOffset{Node: name, JobID: ref.Job, Offset: h.logSize(name, ref.Job)})
		}
	}
	// Once a machine is added the engine may send it a start, which must
	// not overtake the welcome: nothing is written until the welcome is.
	c.wmu.Lock()
	defer c.wmu.Unlock()

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h.reg.Lock()
	defer h.reg.Unlock()
	for name, rn := range c.nodes {
		h.mu.Lock()
		old := h.owners[name]
		h.owners[name] = c
		h.mu.Unlock()
		if old != nil {
			// The agent reconnected before its old connection timed out, or
			// another agent uses the same name: the newest connection wins.
			h.log.Warn("machine taken over by a new agent connection", "node", name, "old", old.remote, "new", c.remote)
			old.closeWith(websocket.ClosePolicyViolation, "machine "+name+" taken over by a new connection")
			if err := h.leave(rctx, old.nodes[name]); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
		}
		if err := h.join(rctx, rn); err != nil {
			h.mu.Lock()
			delete(h.owners, name)
			h.mu.Unlock()
			return fmt.Errorf("add %s: %w", name, err)
		}
	}
	return c.sendLocked(&wire.Message{Type: wire.TypeWelcome, Welcome: welcome})
}

// checkNode checks a machine an agent registers.
func checkNode(n wire.Node) error {
	if err := wire.CheckNodeName(n.Name); err != nil {
		return err
	}
	if n.CPUs < 0 || n.MemMiB < 0 {
		return fmt.Errorf("machine %s: negative CPUs or memory", n.Name)
	}
	if n.Addr != "" {
		if err := wire.CheckAddr(n.Addr); err != nil {
			return fmt.Errorf("machine %s: %w", n.Name, err)
		}
	}
	for i, g := range n.GPUs {
		if g.Index != i || g.MemMiB <= 0 {
			return fmt.Errorf("machine %s: GPU %d: want index %d and some memory, got index %d with %d MiB", n.Name, i, i, g.Index, g.MemMiB)
		}
	}
	for _, ref := range n.Running {
		if ref.Job <= 0 || ref.Run <= 0 {
			return fmt.Errorf("machine %s: running %s: want positive job and run numbers", n.Name, ref)
		}
	}
	return wire.CheckRunningGPUs(n)
}

// unregister disconnects the machines this connection still runs.
func (c *agentConn) unregister(ctx context.Context) {
	h := c.hub
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h.reg.Lock()
	defer h.reg.Unlock()
	for name := range c.nodes {
		h.mu.Lock()
		mine := h.owners[name] == c
		if mine {
			delete(h.owners, name)
		}
		h.mu.Unlock()
		if !mine {
			continue
		}
		if err := h.leave(rctx, c.nodes[name]); err != nil {
			h.log.Error("remove a disconnected machine", "node", name, "err", err)
		}
	}
}

// read handles the agent's messages until the connection ends. Every
// message (and pong) shows the agent alive; silence past the heartbeat
// timeout ends the connection.
func (c *agentConn) read() error {
	timeout := c.hub.cfg.HeartbeatTimeout
	c.ws.SetPongHandler(func(string) error {
		return c.ws.SetReadDeadline(time.Now().Add(timeout))
	})
	// Each message is read whole into buf, kept from one message to the
	// next, and decoded from it: websocket's ReadJSON makes a decoder and
	// its buffer for every message, and grows that buffer as it reads a
	// heartbeat of many machines (BenchmarkHubHeartbeat).
	var buf bytes.Buffer
	for {
		_ = c.ws.SetReadDeadline(time.Now().Add(timeout))
		var m wire.Message
		if err := c.readMessage(&buf, &m); err != nil {
			return err
		}
		if err := m.Check(); err != nil {
			return err
		}
		switch m.Type {
		case wire.TypeHeartbeat:
			c.heartbeat(m.Heartbeat)
		case wire.TypeAck:
			c.pmu.Lock()
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.pmu.Unlock()
			if ch != nil {
				ch <- m.Ack
			}
		case wire.TypeLog:
			if err := c.writeLog(m.Log); err != nil {
				c.hub.log.Error("keep job output", "job", m.Log.JobID, "node", m.Log.Node, "err", err)
			}
		case wire.TypeExit:
			c.queueExit(m.ID, m.Exit)
		default:
			c.hub.log.Warn("unexpected message from an agent", "type", m.Type, "agent", c.agent)
		}
	}
}

// readMessage reads the next message into buf and decodes it into m.
func (c *agentConn) readMessage(buf *bytes.Buffer, m *wire.Message) error {
	_, r, err := c.ws.NextReader()
	if err != nil {
		return err
	}
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return err
	}
	if err := json.Unmarshal(buf.Bytes(), m); err != nil {
		return fmt.Errorf("decode a message: %w", err)
	}
	return nil
}

func (c *agentConn) heartbeat(hb *wire.Heartbeat) {
	c.hub.heartbeats.Add(1)
	c.lastBeat.Store(time.Now().UnixNano())
	for _, ns := range hb.Nodes {
		if rn := c.nodes[ns.Node]; rn != nil {
			rn.setSamples(wire.Samples(ns.Samples), wire.Lanes(ns.Lanes))
			c.hub.copies.observe(rn, rn.setUsage(ns.Usage))
		}
	}
	c.hub.copies.maybeSweep()
}

// writeLog keeps a chunk of a job's output at its offset.
func (c *agentConn) writeLog(l *wire.Log) error {
	if c.nodes[l.Node] == nil || l.JobID <= 0 || l.Offset < 0 {
		return fmt.Errorf("output for job %d on unknown machine %q", l.JobID, l.Node)
	}
	path := c.hub.logPath(l.Node, l.JobID)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	// Chunks come in order from where the server's copy ends (or before,
	// when repeated). One beyond it follows chunks the server could not
	// keep (its disk was full): the gap is marked (core/joboutput).
	return joboutput.WriteChunk(path, l.Offset, l.Data)
}

// queueExit hands an exit to the forwarder, so that reading never waits
// for the engine (which may itself wait for this agent's ack).
func (c *agentConn) queueExit(id uint64, w *wire.Exit) {
	ex := w.Exit()
	if now := time.Now(); ex.At.IsZero() || ex.At.After(now) {
		ex.At = now
	}
	if rn := c.nodes[ex.Node]; rn != nil && c.hub.owner(ex.Node) == c {
		// Before the engine hears of it: a start that follows finds the
		// copy under way.
		c.hub.copies.ended(rn, ex)
	}
	c.qmu.Lock()
	c.exitQ = append(c.exitQ, queuedExit{id, ex})
	c.qmu.Unlock()
	select {
	case c.exitSig <- struct{}{}:
	default:
	}
}

// forwardExits hands exits to the engine in order and acknowledges each
// once the engine has it. Exits of machines this connection no longer runs
// are left unacknowledged: the agent sends them again on its new
// connection.
func (c *agentConn) forwardExits(ctx context.Context) {
	for {
		c.qmu.Lock()
		q := c.exitQ
		c.exitQ = nil
		c.qmu.Unlock()
		for _, qe := range q {
			rn := c.nodes[qe.ex.Node]
			if rn == nil {
				c.answer(qe.id, fmt.Errorf("no machine %q on this connection", qe.ex.Node))
				continue
			}
			if c.hub.owner(qe.ex.Node) != c {
				continue
			}
			rn.ended(qe.ex.Ref())
			// The agent forgets the exit once acknowledged: the ack waits
			// until the engine has stored it.
			id := qe.id
			qe.ex.Recorded = func() { c.answer(id, nil) }
			select {
			case c.hub.registry.Exits() <- qe.ex:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.exitSig:
		}
	}
}

// pingsPerTimeout is how many pings the server sends an agent per
// heartbeat timeout T: an agent last heard at most T/20 before a server
// stops still has 0.95 T of its lease, so a server restart (and the
// agent's reconnection, core/agent fence.go) shorter than about 0.9 T
// costs no run.
const pingsPerTimeout = 20

// ping keeps the agent's read deadline from passing, and its lease from
// running out, while all is well.
func (c *agentConn) ping(ctx context.Context) {
	tick := time.NewTicker(c.hub.cfg.HeartbeatTimeout / pingsPerTimeout)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait)); err != nil {
				return
			}
		}
	}
}

// writeWait bounds one write to an agent.
const writeWait = 10 * time.Second

func (c *agentConn) send(m *wire.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.sendLocked(m)
}

// sendLocked writes m; the caller holds wmu.
func (c *agentConn) sendLocked(m *wire.Message) error {
	_ = c.ws.SetWriteDeadline(time.Now().Add(writeWait))
	if err := c.ws.WriteJSON(m); err != nil {
		return fmt.Errorf("send %s to agent %s: %w", m.Type, c.agent, err)
	}
	return nil
}

func (c *agentConn) answer(id uint64, err error) {
	ack := &wire.Ack{}
	if err != nil {
		ack.Error = err.Error()
	}
	if err := c.send(&wire.Message{Type: wire.TypeAck, ID: id, Ack: ack}); err != nil {
		c.hub.log.Warn("answer an agent", "err", err)
	}
}

// request sends m and waits for the agent's ack, at most AckTimeout.
func (c *agentConn) request(ctx context.Context, m *wire.Message) error {
	m.ID = c.nextID.Add(1)
	ch := make(chan *wire.Ack, 1)
	c.pmu.Lock()
	c.pending[m.ID] = ch
	c.pmu.Unlock()
	defer func() {
		c.pmu.Lock()
		delete(c.pending, m.ID)
		c.pmu.Unlock()
	}()
	select {
	case <-c.closed:
		return job.ErrDisconnected
	default:
	}
	if err := c.send(m); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.hub.cfg.AckTimeout)
	defer cancel()
	select {
	case ack := <-ch:
		node := ""
		if m.Start != nil {
			node = m.Start.Node
		}
		return ack.Err(node) // a *job.AccountError for a refused account
	case <-c.closed:
		return job.ErrDisconnected
	case <-ctx.Done():
		return fmt.Errorf("%w: agent %s did not answer %s in time (%w)", job.ErrDisconnected, c.agent, m.Type, ctx.Err())
	}
}

// remoteNode is a machine run by a remote agent, as the engine drives it.
type remoteNode struct {
	conn    *agentConn
	name    string
	devices []gpu.Device
	cpus    int
	memMiB  int64

	mu      sync.Mutex
	running map[job.RunRef]bool
	samples []gpu.Sample
	lanes   []lanes.GPUView
	usage   []job.Usage // jobs' CPU and memory use (usage.go)
	// monitor: the agent only watches the machine's GPUs (see
	// monitor.go).
	monitor bool
	// runGPUs are the GPUs of the runs the agent reported at hello, nil
	// from agents that do not report them (rungpus.go).
	runGPUs map[int64][]int
	// addr is the address other machines reach it at (wire.Node.Addr).
	addr string
}

// Addr is the address the other machines reach this one at, for the
// rendezvous of runs on several machines (engine.AddrNode).
func (n *remoteNode) Addr() string { return n.addr }

var (
	_ engine.Node = (*remoteNode)(nil)
	_ Registry    = (*engine.Engine)(nil)
)

// Name implements engine.Node.
func (n *remoteNode) Name() string { return n.name }

// Devices implements engine.Node.
func (n *remoteNode) Devices() []gpu.Device { return append([]gpu.Device(nil), n.devices...) }

// Resources implements engine.Node.
func (n *remoteNode) Resources() (cpus int, memMiB int64) { return n.cpus, n.memMiB }

// Start asks the agent to start a run and waits for its answer.
func (n *remoteNode) Start(ctx context.Context, s job.Spec) error {
	ref := job.RunRef{Job: s.JobID, Run: s.Run}
	s.Checkpoint = n.conn.hub.copies.started(n.name, s)
	n.mu.Lock()
	n.running[ref] = true // before sending: the exit may overtake the ack
	n.mu.Unlock()
	m := &wire.Message{Type: wire.TypeStart, Start: &wire.Start{
		Node: n.name, Job: wire.FromSpec(s), LogOffset: n.conn.hub.logSize(n.name, s.JobID),
	}}
	err := n.conn.request(ctx, m)
	if err == nil {
		return nil
	}
	n.ended(ref)
	if errors.Is(err, context.DeadlineExceeded) {
		// It may have started after all: make sure it does not run on.
		go func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.conn.hub.cfg.AckTimeout)
			defer cancel()
			_ = n.Stop(sctx, ref)
		}()
	}
	if strings.Contains(err.Error(), job.ErrBusy.Error()) {
		err = fmt.Errorf("%w: %v", job.ErrBusy, err)
	}
	return fmt.Errorf("start %s on %s: %w", ref, n.name, err)
}

// Stop asks the agent to stop a run and waits for its answer; the exit
// follows.
func (n *remoteNode) Stop(ctx context.Context, ref job.RunRef) error {
	m := &wire.Message{Type: wire.TypeStop, Stop: &wire.Stop{Node: n.name, JobID: ref.Job, Run: ref.Run}}
	if err := n.conn.request(ctx, m); err != nil {
		return fmt.Errorf("stop %s on %s: %w", ref, n.name, err)
	}
	return nil
}

// Running implements engine.Node: the runs the agent reported or started
// whose exits have not arrived.
func (n *remoteNode) Running() []job.RunRef {
	n.mu.Lock()
	defer n.mu.Unlock()
	refs := make([]job.RunRef, 0, len(n.running))
	for ref := range n.running {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(a, b int) bool { return refs[a].Job < refs[b].Job })
	return refs
}

func (n *remoteNode) ended(ref job.RunRef) {
	n.mu.Lock()
	delete(n.running, ref)
	n.mu.Unlock()
}

// Sample implements engine.Node: the GPUs' latest samples from the agent
// (at most a heartbeat old) as of now, or idle GPUs before the first.
func (n *remoteNode) Sample(now time.Time) []gpu.Sample {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]gpu.Sample, len(n.devices))
	if len(n.samples) == len(n.devices) {
		copy(out, n.samples)
	} else {
		for i, d := range n.devices {
			out[i] = gpu.Sample{Index: d.Index, MemMiB: d.MemMiB}
		}
	}
	// Stamped with the server's clock, as local machines' samples are.
	for i := range out {
		out[i].At = now
	}
	return out
}

func (n *remoteNode) setSamples(ss []gpu.Sample, ls []lanes.GPUView) {
	n.mu.Lock()
	n.samples, n.lanes = ss, ls
	n.mu.Unlock()
}

// Lanes are the Salus lanes of the machine's GPUs as of the agent's last
// heartbeat; nil when its agent serves no gate.
func (n *remoteNode) Lanes() []lanes.GPUView {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lanes
}

// LogPath is where the server keeps a job's output from this machine.
func (n *remoteNode) LogPath(jobID int64) string { return n.conn.hub.logPath(n.name, jobID) }

// truncate shortens s to at most n bytes of valid UTF-8.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
