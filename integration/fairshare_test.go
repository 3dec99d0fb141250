package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFairShareReclaim: nlp borrows vision's idle GPU; when vision submits,
// the borrowed job is reclaimed once it has run its minimum runtime.
func TestFairShareReclaim(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x80", "--dev-token", "adm", "--min-runtime", "5s")
	admin := &api{t: t, base: srv.URL, token: "adm"}
	for _, team := range []string{"vision", "nlp"} {
		if st := admin.do("PATCH", "/api/v1/teams/"+team, map[string]any{"guaranteed_gpus": 1, "weight": 1}, nil); st != http.StatusOK {
			t.Fatalf("set share of %s: %d", team, st)
		}
	}
	bob := newAPI(t, srv.URL, "bob", "dev")
	var ids []int64
	for i := range 2 {
		var j jobView
		if st := bob.do("POST", "/api/v1/jobs", map[string]any{"name": fmt.Sprint("nlp", i), "gpus": 1, "sim": map[string]any{"duration_s": 600}}, &j); st != http.StatusCreated {
			t.Fatalf("submit: %d", st)
		}
		ids = append(ids, j.ID)
	}
	var borrowed int64
	var reclaimable, started time.Time
	eventually(t, 20*time.Second, "one of nlp's jobs to borrow vision's GPU", func() bool {
		for _, id := range ids {
			var j struct {
				State         string
				Borrowed      bool
				StartedAt     *time.Time `json:"started_at"`
				ReclaimableAt *time.Time `json:"reclaimable_at"`
			}
			bob.do("GET", fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j)
			if j.State == "running" && j.Borrowed && j.StartedAt != nil && j.ReclaimableAt != nil {
				borrowed, started, reclaimable = id, *j.StartedAt, *j.ReclaimableAt
			}
		}
		return borrowed != 0
	})
	// It may be reclaimed once it has run the minimum runtime, 5 s (to
	// the float seconds of the scheduler's clock).
	if d := reclaimable.Sub(started); d < 5*time.Second-time.Millisecond || d > 6*time.Second {
		t.Errorf("borrowed job %d started at %v, reclaimable at %v: want 5 s later", borrowed, started, reclaimable)
	}

	bb := newBrowser(t, srv.URL)
	bb.login("bob", "dev")
	if _, page := bb.get(fmt.Sprintf("/jobs/%d", borrowed)); !strings.Contains(page, "state-borrowed") || !strings.Contains(page, `id="job-reclaimable"`) ||
		!strings.Contains(page, "a team under its guarantee may take them back") {
		t.Errorf("the borrowed job's page does not say it is borrowed and when it may be reclaimed")
	}
	// The page shows the API's time (one figure, as of the last pass;
	// the pass that starts a job counts from its own clock, the next
	// from the recorded start: read both until one pass gave both).
	var page string
	eventually(t, 10*time.Second, "the page and the API to give one reclaim time", func() bool {
		_, page = bb.get(fmt.Sprintf("/jobs/%d", borrowed))
		var j struct {
			ReclaimableAt *time.Time `json:"reclaimable_at"`
		}
		bob.do("GET", fmt.Sprintf("/api/v1/jobs/%d", borrowed), nil, &j)
		if j.ReclaimableAt == nil {
			return false
		}
		if time.Until(*j.ReclaimableAt) < time.Second {
			// Past, or about to be (5 s after the start): the page may
			// say now.
			return strings.Contains(page, "take them back from "+j.ReclaimableAt.Local().Format(time.DateTime)) ||
				strings.Contains(page, "take them back now")
		}
		return strings.Contains(page, "take them back from "+j.ReclaimableAt.Local().Format(time.DateTime))
	})

	alice := newAPI(t, srv.URL, "alice", "dev")
	var mine jobView
	if st := alice.do("POST", "/api/v1/jobs", map[string]any{"name": "vision0", "gpus": 1, "sim": map[string]any{"duration_s": 600}}, &mine); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	alice.waitState(mine.ID, 30*time.Second, "running")
	victim := bob.job(borrowed)
	if victim.State != "preempted" && victim.State != "queued" {
		t.Errorf("borrowed job = %s, want preempted for vision", victim.State)
	}
	var history []struct{ State, Detail string }
	bob.do("GET", fmt.Sprintf("/api/v1/jobs/%d/history", borrowed), nil, &history)
	reclaimed := false
	for _, h := range history {
		reclaimed = reclaimed || (h.State == "preempted" && strings.Contains(h.Detail, "vision"))
	}
	if !reclaimed {
		t.Errorf("history %+v: no preemption naming the reclaiming team", history)
	}

	var team struct {
		Name          string
		InUseGPUs     float64 `json:"in_use_gpus"`
		GuaranteeGPUs int     `json:"guaranteed_gpus"`
		Factor        float64 `json:"fair_share_factor"`
		Members       []struct{ User string }
	}
	if st := alice.do("GET", "/api/v1/teams/vision", nil, &team); st != http.StatusOK || team.InUseGPUs != 1 || team.GuaranteeGPUs != 1 ||
		team.Factor <= 0 || team.Factor > 1 || len(team.Members) != 2 {
		t.Errorf("vision's page: %d %+v", st, team)
	}
	if st := bob.do("GET", "/api/v1/teams/vision", nil, nil); st != http.StatusForbidden {
		t.Errorf("bob reads vision's page: %d", st)
	}
	b := newBrowser(t, srv.URL)
	b.login("lead", "dev")
	if _, page := b.get("/teams/vision"); !strings.Contains(page, "Cap a member") || strings.Contains(page, "Share (admins)") {
		t.Errorf("the lead's team page should offer caps but not the share form")
	}
}
