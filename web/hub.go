package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/gpuportal/gpuportal/app"
)

// The live stream: one websocket endpoint (/ws) where a client subscribes
// to topics, in the URL (/ws?topics=gpus,jct) or by sending
// {"subscribe": ["job:12"]} (and {"unsubscribe": [...]}). After each
// subscription the client gets a snapshot of the topic, then updates at
// most once a second. Machines report one at a time; the publisher (Run,
// ws.go) coalesces their readings per GPU, not per topic, so that each
// update carries the latest reading of every machine that reported since
// the last. The hub never blocks on a slow client: each client keeps only
// the newest unsent message per topic, and a client that cannot take a
// message within clientWriteWait is dropped with a close reason.

// Topics a client may ask for.
const (
	topicGPUs   = "gpus"   // every GPU's memory and jobs, each second
	topicQueues = "queues" // the scheduler's queues
	topicJCT    = "jct"    // JCT figures of the last 24 hours
	topicJob    = "job:"   // job:<id>: the job's state and its GPU memory
	topicGPU    = "gpu:"   // gpu:<uuid>: one GPU's memory and jobs, each second
	topicTeam   = "team:"  // team:<name>: the team's GPUs and queue (its members and admins)
)

// topicKinds lists the topics; the authorization test walks each.
var topicKinds = []string{topicGPUs, topicQueues, topicJCT, topicJob, topicGPU, topicTeam}

const (
	clientWriteWait = 10 * time.Second
	maxTopics       = 32 // per client
	maxClientBytes  = 4096
)

// wsOut is one message to a client.
type wsOut struct {
	Topic string `json:"topic"`
	Type  string `json:"type"` // "snapshot", "update" or "error"
	Data  any    `json:"data,omitempty"`
	Error string `json:"error,omitempty"`
	// prepared, when set, is the message encoded once for many clients.
	prepared *websocket.PreparedMessage
}

// encode is m as it goes on the wire.
func encode(m wsOut) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s update: %w", m.Topic, err)
	}
	return b, nil
}

// prepare makes m, encoded as b, ready to send to many clients: each
// write then costs a system call and no encoding.
func prepare(m wsOut, b []byte) (wsOut, error) {
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, b)
	if err != nil {
		return m, fmt.Errorf("prepare %s update: %w", m.Topic, err)
	}
	m.prepared = pm
	return m, nil
}

// wsIn is what a client may send.
type wsIn struct {
	Subscribe   []string `json:"subscribe"`
	Unsubscribe []string `json:"unsubscribe"`
}

// hub knows the connected clients and, per topic, who follows it, so that
// a publish touches only the followers.
type hub struct {
	log *slog.Logger

	mu      sync.Mutex
	clients map[*wsClient]struct{}
	perUser map[int64]int // sockets per user ID, counted from reserve
	topics  map[string]map[*wsClient]struct{}
	// last is the last broadcast of each followed topic, by message type,
	// as encoded: an update equal to it is not sent again.
	last map[string]map[string][]byte

	// poked asks for the clients' credentials to be checked now
	// (sockets.go): Config.AccessChanged; nil, never.
	poked <-chan struct{}
}

func newHub(log *slog.Logger) *hub {
	return &hub{log: log, clients: make(map[*wsClient]struct{}), perUser: make(map[int64]int),
		topics: make(map[string]map[*wsClient]struct{}), last: make(map[string]map[string][]byte)}
}

// changed records b as the last broadcast of topic and type, and reports
// whether it differs from the one before: followers have that one already
// (or a snapshot at least as new).
func (h *hub) changed(topic, typ string, b []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	byType := h.last[topic]
	if byType == nil {
		if h.topics[topic] == nil {
			return true // nobody follows it: nothing to remember
		}
		byType = make(map[string][]byte)
		h.last[topic] = byType
	}
	if bytes.Equal(byType[typ], b) {
		return false
	}
	byType[typ] = b
	return true
}

// wsClient is one connected browser or program.
type wsClient struct {
	// user is who the client is as of its credential's last check
	// (sockets.go): every subscription and delivery is judged by it.
	user atomic.Pointer[app.User]
	// cred is what the client authenticated with, checked again and
	// again; opened is when it connected.
	cred   credential
	opened time.Time
	conn   *websocket.Conn

	// follows is the client's topics, guarded by the hub's mutex.
	follows map[string]bool

	mu      sync.Mutex
	pending []wsOut // newest unsent message per topic and type, oldest first
	spare   []wsOut // the slice next returned last time, reused
	wake    chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func newClient(u *app.User, conn *websocket.Conn) *wsClient {
	c := &wsClient{conn: conn, follows: make(map[string]bool),
		wake: make(chan struct{}, 1), closed: make(chan struct{})}
	c.user.Store(u)
	return c
}

// viewer is the client's user as last checked.
func (c *wsClient) viewer() *app.User { return c.user.Load() }

// reserve counts a new connection of user userID, unless the user has
// max already; release undoes it. The hub counts at most max live
// sockets per user, so that no user holds the server's memory and
// publishing time.
func (h *hub) reserve(userID int64, max int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.perUser[userID] >= max {
		return false
	}
	h.perUser[userID]++
	return true
}

func (h *hub) release(userID int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.perUser[userID]--; h.perUser[userID] <= 0 {
		delete(h.perUser, userID)
	}
}

func (h *hub) add(c *wsClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients[c] = struct{}{}
}

func (h *hub) remove(c *wsClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c)
	for t := range c.follows {
		h.unfollowLocked(c, t)
	}
}

// all returns the connected clients.
func (h *hub) all() []*wsClient {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*wsClient, 0, len(h.clients))
	for c := range h.clients {
		out = append(out, c)
	}
	return out
}

// topicsOf returns the topics c follows.
func (h *hub) topicsOf(c *wsClient) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(c.follows))
	for t := range c.follows {
		out = append(out, t)
	}
	return out
}

// follow subscribes c to topic; false when c follows maxTopics already.
func (h *hub) follow(c *wsClient, topic string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.follows[topic] {
		return true
	}
	if len(c.follows) >= maxTopics {
		return false
	}
	c.follows[topic] = true
	set := h.topics[topic]
	if set == nil {
		set = make(map[*wsClient]struct{})
		h.topics[topic] = set
	}
	set[c] = struct{}{}
	return true
}

func (h *hub) unfollow(c *wsClient, topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unfollowLocked(c, topic)
}

func (h *hub) unfollowLocked(c *wsClient, topic string) {
	delete(c.follows, topic)
	if set := h.topics[topic]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(h.topics, topic)
			delete(h.last, topic)
		}
	}
}

// count is the number of connected clients.
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// subscribers returns the clients subscribed to topic.
func (h *hub) subscribers(topic string) []*wsClient {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.topics[topic]
	if len(set) == 0 {
		return nil
	}
	out := make([]*wsClient, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	return out
}

// followed returns the topics starting with prefix that some client follows.
func (h *hub) followed(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for t := range h.topics {
		if strings.HasPrefix(t, prefix) {
			out = append(out, t)
		}
	}
	return out
}

// jobTopics returns the job IDs some client follows.
func (h *hub) jobTopics() []int64 {
	var out []int64
	for _, t := range h.followed(topicJob) {
		if id, ok := jobTopicID(t); ok {
			out = append(out, id)
		}
	}
	return out
}

func jobTopicID(topic string) (int64, bool) {
	v, ok := strings.CutPrefix(topic, topicJob)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(v, 10, 64)
	return id, err == nil && id > 0
}

// send queues m, replacing an unsent message of the same topic and type.
// It never blocks and, once the queue has grown to the client's topics,
// allocates nothing.
func (c *wsClient) send(m wsOut) {
	c.mu.Lock()
	replaced := false
	for i := range c.pending {
		if c.pending[i].Topic == m.Topic && c.pending[i].Type == m.Type {
			c.pending[i] = m
			replaced = true
			break
		}
	}
	if !replaced {
		c.pending = append(c.pending, m)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// next takes the pending messages, oldest topic first. The slice is the
// client's until the next call: only the write loop calls it.
func (c *wsClient) next() []wsOut {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.pending
	c.pending, c.spare = c.spare[:0], out
	return out
}

// writeLoop sends queued messages until the client goes or cannot keep up.
func (c *wsClient) writeLoop(ctx context.Context, log *slog.Logger) {
	ping := time.NewTicker(30 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			c.close(websocket.CloseGoingAway, "server shutting down")
			return
		case <-c.closed:
			return
		case <-ping.C:
			if err := c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(clientWriteWait)); err != nil {
				c.close(websocket.CloseGoingAway, "")
				return
			}
		case <-c.wake:
			msgs := c.next()
			for _, m := range msgs {
				if err := c.conn.SetWriteDeadline(time.Now().Add(clientWriteWait)); err != nil {
					c.close(websocket.CloseGoingAway, "")
					return
				}
				var err error
				if m.prepared != nil {
					err = c.conn.WritePreparedMessage(m.prepared)
				} else {
					err = c.conn.WriteJSON(m)
				}
				if err != nil {
					log.Info("websocket client dropped", "user", c.viewer().Name, "err", err)
					c.close(websocket.ClosePolicyViolation, "too slow: messages could not be delivered in time")
					return
				}
			}
			clear(msgs) // let the sent data go
		}
	}
}

// close ends the connection once, with a reason the client can read.
func (c *wsClient) close(code int, reason string) {
	c.once.Do(func() {
		_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
		_ = c.conn.Close()
		close(c.closed)
	})
}

// readMessage reads one subscription message, refusing oversized ones.
func readMessage(conn *websocket.Conn) (wsIn, error) {
	var in wsIn
	_, r, err := conn.NextReader()
	if err != nil {
		return in, err
	}
	dec := json.NewDecoder(io.LimitReader(r, maxClientBytes))
	dec.DisallowUnknownFields() // {"subscibe": [...]} is said, not ignored
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf("message must be JSON like {\"subscribe\": [\"gpus\"]}: %w", err)
	}
	return in, nil
}
