package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFairShareInsideTeam: alice sweeps 8 jobs over her team's 2 GPUs;
// the lead, her teammate, submits one job after; it starts before the
// sweep finishes, because alice has used more of the team's guarantee.
func TestFairShareInsideTeam(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x80", "--dev-token", "adm")
	admin := &api{t: t, base: srv.URL, token: "adm"}
	if st := admin.do("PATCH", "/api/v1/teams/vision", map[string]any{"guaranteed_gpus": 2, "weight": 1}, nil); st != http.StatusOK {
		t.Fatalf("set share of vision: %d", st)
	}
	alice := newAPI(t, srv.URL, "alice", "dev")
	var sweep []int64
	for i := range 8 {
		var j jobView
		if st := alice.do("POST", "/api/v1/jobs", map[string]any{"name": fmt.Sprint("sweep", i), "gpus": 1, "sim": map[string]any{"duration_s": 2}}, &j); st != http.StatusCreated {
			t.Fatalf("submit: %d", st)
		}
		sweep = append(sweep, j.ID)
	}
	alice.waitState(sweep[0], 20*time.Second, "running")
	lead := newAPI(t, srv.URL, "lead", "dev")
	var mine jobView
	if st := lead.do("POST", "/api/v1/jobs", map[string]any{"name": "lead0", "gpus": 1, "sim": map[string]any{"duration_s": 2}}, &mine); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	lead.waitState(mine.ID, 30*time.Second, "running")
	waiting := 0
	for _, id := range sweep {
		if s := alice.job(id).State; s == "queued" {
			waiting++
		}
	}
	if waiting == 0 {
		t.Errorf("the lead's job started only after alice's whole sweep")
	}
	b := newBrowser(t, srv.URL)
	b.login("lead", "dev")
	if _, page := b.get("/teams/vision"); !strings.Contains(page, `data-member="alice"`) || !strings.Contains(page, `data-field="factor"`) {
		t.Errorf("the lead's team page does not show members' shares")
	}
	a := newBrowser(t, srv.URL)
	a.login("alice", "dev")
	if _, page := a.get("/teams/vision"); strings.Contains(page, `data-field="factor"`) {
		t.Errorf("a researcher sees members' shares")
	}
}
