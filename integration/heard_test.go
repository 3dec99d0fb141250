package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// nodeHeard is what GET /api/v1/nodes says of when a machine was heard.
type nodeHeard struct {
	Name        string     `json:"name"`
	LastHeardAt *time.Time `json:"last_heard_at"`
	LastHeardS  *float64   `json:"last_heard_s"`
	Unheard     bool       `json:"unheard"`
	GPUs        []struct {
		Index int `json:"index"`
	} `json:"gpus"`
}

func heardOf(t *testing.T, a *api, name string) (nodeHeard, bool) {
	t.Helper()
	var ns []nodeHeard
	if st := a.do(http.MethodGet, "/api/v1/nodes", nil, &ns); st != http.StatusOK {
		t.Fatalf("GET /api/v1/nodes: %d", st)
	}
	for _, n := range ns {
		if n.Name == name {
			return n, true
		}
	}
	return nodeHeard{}, false
}

// TestUnheardMachineShowsItsAge (issue 32): a machine the server cannot
// hear (its network cut) is shown as last known, with its age: the API
// says unheard with last_heard_s, the cluster page "last heard N s ago"
// over its last known GPUs, rather than dropping it or showing its
// last figures as live. Once it is heard again, it is live again.
func TestUnheardMachineShowsItsAge(t *testing.T) {
	data := t.TempDir()
	srv := faultServer(t, data)
	fw := newForwarder(t, strings.TrimPrefix(srv.URL, "http://"))
	oneGPUAgent(t, "http://"+fw.addr(), "cut")
	waitGPUs(t, srv.URL, 1)
	admin := newAPI(t, srv.URL, "admin", "dev")
	if n, ok := heardOf(t, admin, "cut"); !ok || n.Unheard || n.LastHeardS == nil || *n.LastHeardS > 3 {
		t.Fatalf("a connected machine: %+v, %v; want heard within 3 s", n, ok)
	}
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "on-cut", "gpus": 1, "command": []string{"sleep", "60"}})
	alice.waitState(id, 30*time.Second, "running")
	fw.freeze()
	var n nodeHeard
	eventually(t, 20*time.Second, "the cut machine shown unheard for over 3 s", func() bool {
		var ok bool
		n, ok = heardOf(t, admin, "cut")
		return ok && n.Unheard && n.LastHeardS != nil && *n.LastHeardS > 3
	})
	if len(n.GPUs) != 1 || n.LastHeardAt == nil {
		t.Errorf("the unheard machine: %+v; want its last known GPU and when it was heard", n)
	}
	// Its job runs as last known, and says since when.
	if j := alice.job(id); j.State != "running" || !strings.HasPrefix(j.Reason, "running as last known: cut was last heard ") {
		t.Errorf("the job on the unheard machine: %s, %q; want running as last known, with the machine's age", j.State, j.Reason)
	}
	b := newBrowser(t, srv.URL)
	b.login("admin", "dev")
	if _, page := b.get("/cluster"); !strings.Contains(page, "cut") || !strings.Contains(page, "last heard") || !strings.Contains(page, "GPU 0") {
		t.Errorf("the cluster page does not show the cut machine's last known GPU with its age:\n%s", page)
	}
	fw.thaw()
	eventually(t, 30*time.Second, "the machine heard again", func() bool {
		n, ok := heardOf(t, admin, "cut")
		return ok && !n.Unheard
	})
	if _, page := b.get("/cluster"); strings.Contains(page, "last heard") {
		t.Error("the cluster page still says the machine was last heard a while ago once it is heard again")
	}
}
