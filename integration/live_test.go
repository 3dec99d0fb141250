package integration

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestGPUStream follows the GPU stream as the cluster page does: history
// first, then a frame a second showing the running job's memory.
func TestGPUStream(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x40")
	b := newBrowser(t, srv.URL)
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws/gpus"

	// Without a session the socket is refused.
	if _, resp, err := websocket.DefaultDialer.Dial(wsURL, nil); err == nil || resp == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		t.Fatalf("anonymous websocket accepted")
	}
	// From another site's page it is refused too.
	b.login("alice", "dev")
	u, _ := url.Parse(srv.URL)
	hdr := http.Header{}
	for _, ck := range b.c.Jar.Cookies(u) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	evil := hdr.Clone()
	evil.Set("Origin", "http://evil.example")
	if _, _, err := websocket.DefaultDialer.Dial(wsURL, evil); err == nil {
		t.Fatalf("cross-origin websocket accepted")
	}

	a := newAPI(t, srv.URL, "alice", "dev")
	var j jobView
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "mem", "gpus": 1, "gpu_mem_gb": 10, "sim": map[string]any{"duration_s": 60}}, &j); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	a.waitState(j.ID, 30*time.Second, "running")

	conn, _, err := websocket.DefaultDialer.Dial(wsURL, hdr)
	if err != nil {
		t.Fatalf("dial with session: %v", err)
	}
	defer conn.Close()
	type jobMem struct{ JobID, MemMiB int64 }
	type msg struct {
		Type    string
		History []struct {
			Node  string
			Index int
		}
		Frame *struct {
			T    int64
			GPUs []struct {
				Node       string
				Index      int
				MemUsedMiB int64
				Jobs       []jobMem
			}
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var first msg
	if err := conn.ReadJSON(&first); err != nil || first.Type != "history" || len(first.History) != 2 {
		t.Fatalf("first message = %+v, %v; want the history of 2 GPUs", first, err)
	}
	seen := false
	for range 5 {
		var m msg
		if err := conn.ReadJSON(&m); err != nil {
			t.Fatalf("read frame: %v", err)
		}
		for _, g := range m.Frame.GPUs {
			for _, jm := range g.Jobs {
				if jm.JobID == j.ID && jm.MemMiB > 0 && jm.MemMiB <= 10*1024 {
					seen = true
				}
			}
		}
		if seen {
			break
		}
	}
	if !seen {
		t.Errorf("no frame showed job %d's memory", j.ID)
	}

	var pts []json.RawMessage
	if st := a.do("GET", "/api/v1/jobs/"+jsonID(j.ID)+"/memory", nil, &pts); st != http.StatusOK || len(pts) == 0 {
		t.Errorf("job memory API: status %d, %d points", st, len(pts))
	}
}

func jsonID(id int64) string { b, _ := json.Marshal(id); return string(b) }
