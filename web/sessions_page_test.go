package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

// TestSessionsPage: each user sees their own sessions as cards, with
// their state, time left and open button (disabled, with why, until the
// session runs); a batch job is not a session, and nobody sees another's.
func TestSessionsPage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.newSession(t) // alice's Jupyter session, waiting
	ts.newJob(t)     // alice's batch job
	limited := &models.Job{Name: "term", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(),
		SessionType: "terminal", SessionSecret: "k1.salt-term", TimeLimitS: 7200}
	if err := ts.store.CreateJob(context.Background(), limited); err != nil {
		t.Fatal(err)
	}
	ended := &models.Job{Name: "old-nb", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(),
		SessionType: "jupyter", SessionSecret: "k1.salt-old"}
	if err := ts.store.CreateJob(context.Background(), ended); err != nil {
		t.Fatal(err)
	}
	if err := ts.store.Cancel(context.Background(), ended.ID, "cancelled by alice", time.Now()); err != nil {
		t.Fatal(err)
	}

	rec := ts.do(t, "alice", http.MethodGet, "/sessions", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /sessions as alice: %d", rec.Code)
	}
	page := rec.Body.String()
	if n := strings.Count(page, `class="card session-card"`); n != 3 {
		t.Errorf("alice sees %d session cards; want 3 (two waiting, one ended)", n)
	}
	for _, want := range []string{">nb<", ">term<", ">old-nb<", "Jupyter", "terminal", "02:00:00 left of 02:00:00", "no time limit",
		"It can be opened once it runs.", "disabled", "<h2>Ended</h2>"} {
		if !strings.Contains(page, want) {
			t.Errorf("alice's sessions page does not say %q", want)
		}
	}
	if strings.Contains(page, ">j<") {
		t.Error("a batch job is shown as a session")
	}
	bob := ts.do(t, "bob", http.MethodGet, "/sessions", "").Body.String()
	if strings.Contains(bob, `class="card session-card"`) || !strings.Contains(bob, "No session of yours waits or runs.") {
		t.Errorf("bob sees alice's sessions, or no word that he has none")
	}
}
