package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	apitypes "github.com/gpuportal/gpuportal/api"
)

type wsMsg struct {
	Topic string          `json:"topic"`
	Type  string          `json:"type"`
	Data  json.RawMessage `json:"data"`
	Error string          `json:"error"`
}

// readUntil reads messages until f accepts one, or fails after n messages.
func readUntil(t *testing.T, conn *websocket.Conn, n int, f func(wsMsg) bool) wsMsg {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for range n {
		var m wsMsg
		if err := conn.ReadJSON(&m); err != nil {
			t.Fatalf("read: %v", err)
		}
		if f(m) {
			return m
		}
	}
	t.Fatalf("no wanted message within %d messages", n)
	return wsMsg{}
}

// TestLiveStream follows the websocket as the pages do: GPU history then a
// frame a second, a job's memory, and the refusals: no session, another
// site's page, another team's job.
func TestLiveStream(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x40")
	b := newBrowser(t, srv.URL)
	base := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"

	if _, resp, err := websocket.DefaultDialer.Dial(base+"?topics=gpus", nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous websocket: want 401")
	}
	b.login("alice", "dev")
	u, _ := url.Parse(srv.URL)
	hdr := http.Header{}
	for _, ck := range b.c.Jar.Cookies(u) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	evil := hdr.Clone()
	evil.Set("Origin", "http://evil.example")
	if _, _, err := websocket.DefaultDialer.Dial(base, evil); err == nil {
		t.Fatalf("cross-origin websocket accepted")
	}

	a := newAPI(t, srv.URL, "alice", "dev")
	var j jobView
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "mem", "gpus": 1, "gpu_mem_gb": 10, "sim": map[string]any{"duration_s": 60}}, &j); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	a.waitState(j.ID, 30*time.Second, "running")

	conn, _, err := websocket.DefaultDialer.Dial(base+"?topics=gpus", hdr)
	if err != nil {
		t.Fatalf("dial with session: %v", err)
	}
	defer conn.Close()
	snap := readUntil(t, conn, 1, func(m wsMsg) bool { return m.Topic == "gpus" && m.Type == "snapshot" })
	var wall apitypes.GPUWall
	if err := json.Unmarshal(snap.Data, &wall); err != nil || len(wall.GPUs) != 2 || wall.Step < 1 || len(wall.Cluster) == 0 {
		t.Fatalf("gpus snapshot: %v, %d GPUs in steps of %d s, %d cluster seconds; want 2 GPUs", err, len(wall.GPUs), wall.Step, len(wall.Cluster))
	}
	// An update: each GPU's newest reading in a few numbers (index, memory
	// used, memory, then the jobs placed on it): the job's GPU in use.
	readUntil(t, conn, 5, func(m wsMsg) bool {
		var f apitypes.GPUsUpdate
		if m.Type != "update" || json.Unmarshal(m.Data, &f) != nil {
			return false
		}
		for _, n := range f.Nodes {
			for _, g := range n.GPUs {
				if len(g) > 3 && slices.Contains(g[3:], j.ID) && g[1] > 0 && g[1] <= g[2] {
					return true
				}
			}
		}
		return false
	})

	// A job's topic: snapshot, then updates with its memory.
	topic := fmt.Sprintf("job:%d", j.ID)
	if err := conn.WriteJSON(map[string]any{"subscribe": []string{topic}, "unsubscribe": []string{"gpus"}}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, conn, 10, func(m wsMsg) bool {
		var upd apitypes.JobUpdate
		_ = json.Unmarshal(m.Data, &upd)
		return m.Topic == topic && m.Type == "update" && upd.Job.State == "running" && len(upd.Memory) == 1 &&
			upd.Memory[0].MemMiB > 0 && upd.Memory[0].Node != ""
	})

	// Bob may not follow alice's job, nor guess that it exists.
	bob := newBrowser(t, srv.URL)
	bob.login("bob", "dev")
	bh := http.Header{}
	for _, ck := range bob.c.Jar.Cookies(u) {
		bh.Add("Cookie", ck.Name+"="+ck.Value)
	}
	bc, _, err := websocket.DefaultDialer.Dial(base+"?topics="+topic+",job:99999", bh)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	var errs []string
	readUntil(t, bc, 2, func(m wsMsg) bool {
		if m.Type != "error" {
			t.Errorf("bob got %s of %s", m.Type, m.Topic)
		}
		errs = append(errs, m.Error)
		return len(errs) == 2
	})
	if strings.Replace(errs[0], fmt.Sprint(j.ID), "N", 1) != strings.Replace(errs[1], "99999", "N", 1) {
		t.Errorf("another team's job and a missing one get different answers: %q vs %q", errs[0], errs[1])
	}

	// A program with a bearer token may use the stream too.
	tokHdr := http.Header{"Authorization": {"Bearer " + a.token}}
	tc, _, err := websocket.DefaultDialer.Dial(base+"?topics=jct,queues", tokHdr)
	if err != nil {
		t.Fatalf("dial with token: %v", err)
	}
	defer tc.Close()
	got := map[string]bool{}
	readUntil(t, tc, 2, func(m wsMsg) bool { got[m.Topic+"/"+m.Type] = true; return len(got) == 2 })
	if !got["jct/snapshot"] || !got["queues/snapshot"] {
		t.Errorf("token client got %v", got)
	}
}
