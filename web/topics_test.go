package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/gpu"
)

// liveServer is a test server behind HTTP with one simulated machine of
// two GPUs, publishing to the live stream.
type liveServer struct {
	*testServer
	url  string
	gpus []gpu.Device
}

func newLiveServer(t *testing.T) *liveServer {
	t.Helper()
	ts := newTestServer(t)
	local, err := agent.New(agent.Config{Name: "node-0", Backend: gpu.NewSim("node-0", 2, 1024), WorkDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.engine.AddNode(context.Background(), local); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ts.Handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ts.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &liveServer{testServer: ts, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws", gpus: local.Devices()}
}

// dial opens the live stream as role with a bearer token.
func (ls *liveServer) dial(t *testing.T, role, topics string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	hdr := http.Header{}
	if tok := ls.tokens[role]; tok != "" {
		hdr.Set("Authorization", "Bearer "+tok)
	}
	c, resp, err := websocket.DefaultDialer.Dial(ls.url+"?topics="+topics, hdr)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, resp, err
}

// readUntil reads messages until ok accepts one or 5 seconds pass.
func readUntil(t *testing.T, c *websocket.Conn, ok func(m wsMsg) bool) wsMsg {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		var m wsMsg
		if err := c.ReadJSON(&m); err != nil {
			t.Fatalf("no message as wanted: %v", err)
		}
		if ok(m) {
			return m
		}
	}
}

// wsMsg is a message of the stream as a client reads it.
type wsMsg struct {
	Topic string          `json:"topic"`
	Type  string          `json:"type"`
	Data  json.RawMessage `json:"data"`
	Error string          `json:"error"`
}

// TestEveryTopicHasARule subscribes to each topic as every role and
// checks who gets a snapshot and who an error. A topic missing from the
// table fails the test: a new topic needs a rule here.
func TestEveryTopicHasARule(t *testing.T) {
	ls := newLiveServer(t)
	job := ls.newJob(t) // alice's, team vision
	const (
		snap = "snapshot"
		no   = "error"
	)
	rules := []struct {
		kind  string // the topic constant it covers
		topic string
		want  [4]string // alice (vision), bob (nlp), lead (vision), admin
	}{
		{topicGPUs, "gpus", [4]string{snap, snap, snap, snap}},
		{topicQueues, "queues", [4]string{snap, snap, snap, snap}},
		{topicJCT, "jct", [4]string{snap, snap, snap, snap}},
		{topicJob, fmt.Sprintf("job:%d", job), [4]string{snap, no, snap, snap}},
		{topicJob, "job:999999", [4]string{no, no, no, no}},
		{topicGPU, "gpu:" + ls.gpus[1].UUID, [4]string{snap, snap, snap, snap}},
		{topicGPU, "gpu:GPU-none", [4]string{no, no, no, no}},
		{topicTeam, "team:vision", [4]string{snap, no, snap, snap}},
		{topicTeam, "team:nlp", [4]string{no, snap, no, snap}},
		{topicTeam, "team:nosuch", [4]string{no, no, no, no}},
		{"", "nonsense", [4]string{no, no, no, no}},
	}
	covered := map[string]bool{}
	for _, r := range rules {
		covered[r.kind] = true
		for i, role := range []string{"alice", "bob", "lead", "admin"} {
			t.Run(r.topic+" as "+role, func(t *testing.T) {
				c, _, err := ls.dial(t, role, r.topic)
				if err != nil {
					t.Fatal(err)
				}
				m := readUntil(t, c, func(m wsMsg) bool { return m.Topic == r.topic })
				if m.Type != r.want[i] {
					t.Errorf("%s as %s: %s %s %.200s, want %s", r.topic, role, m.Type, m.Error, m.Data, r.want[i])
				}
				if m.Type == no && strings.Contains(r.topic, "team:") && !strings.Contains(m.Error, "that you may see") {
					t.Errorf("refusal %q does not read the same for unknown and forbidden teams", m.Error)
				}
			})
		}
	}
	for _, kind := range topicKinds {
		if !covered[kind] {
			t.Errorf("topic %q has no rule in this test", kind)
		}
	}
	if _, resp, err := ls.dial(t, "anonymous", "gpus"); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous dial: %v, want 401", err)
	}
}

func TestGPUTopicSendsOneGPU(t *testing.T) {
	ls := newLiveServer(t)
	want := ls.gpus[1]
	c, _, err := ls.dial(t, "bob", "gpu:"+want.UUID)
	if err != nil {
		t.Fatal(err)
	}
	snap := readUntil(t, c, func(m wsMsg) bool { return m.Type == "snapshot" })
	var s api.GPUSeries
	if err := json.Unmarshal(snap.Data, &s); err != nil || s.UUID != want.UUID || s.Node != "node-0" || s.Index != 1 || s.Points == nil {
		t.Fatalf("snapshot = %+v, %v", s, err)
	}
	at := time.Now()
	ls.cfg.Telemetry.Record("node-0", []gpu.Sample{
		{At: at, Index: 0, MemUsedMiB: 100, MemMiB: 1024},
		{At: at, Index: 1, MemUsedMiB: 700, MemMiB: 1024, PowerW: 210, TempC: 61},
	})
	upd := readUntil(t, c, func(m wsMsg) bool { return m.Type == "update" })
	var u api.GPUSeries
	if err := json.Unmarshal(upd.Data, &u); err != nil {
		t.Fatal(err)
	}
	if u.UUID != want.UUID || len(u.Points) != 1 || u.Points[0].MemUsedMiB != 700 || u.Points[0].PowerW != 210 || u.Points[0].TempC != 61 {
		t.Errorf("update = %+v; want GPU 1's point only", u)
	}
}

func TestTeamTopicSendsTheTeamAndItsQueue(t *testing.T) {
	ls := newLiveServer(t)
	job := ls.newJob(t) // vision
	c, _, err := ls.dial(t, "lead", "team:vision")
	if err != nil {
		t.Fatal(err)
	}
	var got api.TeamTopic
	readUntil(t, c, func(m wsMsg) bool {
		if m.Topic != "team:vision" || m.Type == "error" {
			t.Fatalf("message %+v", m)
		}
		if err := json.Unmarshal(m.Data, &got); err != nil {
			t.Fatal(err)
		}
		return len(got.Queue) > 0
	})
	if got.Team.Name != "vision" || got.Team.GuaranteeGPUs != 2 {
		t.Errorf("team = %+v", got.Team)
	}
	for _, j := range got.Queue {
		if j.Team != "vision" {
			t.Errorf("job %d of team %s on vision's topic", j.ID, j.Team)
		}
	}
	if got.Queue[0].ID != job || got.Queue[0].User != "alice" {
		t.Errorf("queue = %+v; want alice's job %d named", got.Queue, job)
	}
	// Updates follow, at most once a second, without asking again.
	ls.cfg.Telemetry.Record("node-0", []gpu.Sample{{At: time.Now(), Index: 0, MemMiB: 1024}})
	readUntil(t, c, func(m wsMsg) bool { return m.Topic == "team:vision" && m.Type == "update" })
}

func TestUnsubscribeStopsUpdates(t *testing.T) {
	ls := newLiveServer(t)
	c, _, err := ls.dial(t, "alice", "gpus")
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, func(m wsMsg) bool { return m.Type == "snapshot" })
	if err := c.WriteJSON(wsIn{Unsubscribe: []string{"gpus"}, Subscribe: []string{"jct"}}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, func(m wsMsg) bool { return m.Topic == "jct" })
	if n := len(ls.hub.subscribers(topicGPUs)); n != 0 {
		t.Errorf("%d subscribers of gpus after unsubscribing", n)
	}
	if got := ls.hub.followed(""); len(got) != 1 || got[0] != "jct" {
		t.Errorf("followed topics = %v, want [jct]", got)
	}
}

// TestMessageWithUnknownFieldIsRefused: a message with a field the
// stream does not read (a typo of subscribe) is answered with an error
// naming it, as the API refuses unknown fields; it was ignored.
func TestMessageWithUnknownFieldIsRefused(t *testing.T) {
	ls := newLiveServer(t)
	c, _, err := ls.dial(t, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"subscibe": ["jct"]}`)); err != nil {
		t.Fatal(err)
	}
	m := readUntil(t, c, func(m wsMsg) bool { return m.Type == "error" })
	if !strings.Contains(m.Error, `unknown field "subscibe"`) {
		t.Errorf("error = %q, want it to name the field", m.Error)
	}
}
