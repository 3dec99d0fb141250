package integration

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// reclaimJob is what TestIdleReclaim reads of a job.
type reclaimJob struct {
	State       string `json:"state"`
	Reason      string `json:"reason"`
	Preemptions int    `json:"preemptions"`
	Idle        *struct {
		Idle           bool       `json:"idle"`
		ReclaimAt      *time.Time `json:"reclaim_at"`
		KeepAliveUntil *time.Time `json:"keep_alive_until"`
	} `json:"idle"`
}

// TestIdleReclaim runs a simulated job at 0% GPU utilization on the one
// simulated GPU, with a job waiting behind it, a team policy that
// reclaims idle batch jobs, --idle-after 3s and --idle-reclaim-grace 3s:
// the job is warned (the API's reclaim_at, its page's banner), kept
// alive from its page's button (no warning while kept), then preempted
// grace after the keep-alive ends with reason "reclaimed: idle since
// HH:MM"; its GPU starts the job waiting behind it, while it goes to the
// back of the queue; /metrics counts the reclaimed GPU-seconds for the
// team, and accounting's reclaimed GPU-hours equal them.
func TestIdleReclaim(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80", "--idle-after", "3s", "--idle-reclaim-grace", "3s",
		"--webhook-allow", webhookAllow)
	admin := newAPI(t, srv.URL, "admin", "dev")
	alice := newAPI(t, srv.URL, "alice", "dev") // vision
	bob := newAPI(t, srv.URL, "bob", "dev")     // nlp
	// vision's lead chose to be told of idle jobs: the team's too.
	leadHook := newHook(t, "lead-secret", func(int) int { return http.StatusOK })
	lead := newAPI(t, srv.URL, "lead", "dev")
	if st := lead.do(http.MethodPut, "/api/v1/me/notifications", map[string]any{"webhook_url": leadHook.srv.URL + "/hook",
		"webhook_secret": "lead-secret", "events": []string{"idle"}}, nil); st != http.StatusOK {
		t.Fatalf("the lead's notification settings: %d", st)
	}
	// Leads and admins set the policy; members may not.
	if st := alice.do(http.MethodPut, "/api/v1/teams/vision/idle-policy", map[string]any{"reclaim_batch": true}, nil); st != http.StatusForbidden {
		t.Errorf("a member set the idle policy: status %d, want 403", st)
	}
	if st := admin.do(http.MethodPut, "/api/v1/teams/vision/idle-policy", map[string]any{"reclaim_sessions": true, "reclaim_batch": true, "max_keep_alive_hours": 1}, nil); st != http.StatusOK {
		t.Fatalf("set vision's idle policy: status %d", st)
	}
	idleID := submit(t, alice, map[string]any{"name": "idle", "gpus": 1, "sim": map[string]any{"duration_s": 600, "util_pct": 0}})
	waitJob(t, alice, idleID, 15*time.Second, "running")
	nextID := submit(t, bob, map[string]any{"name": "next", "gpus": 1, "sim": map[string]any{"duration_s": 600}})
	path := fmt.Sprintf("/api/v1/jobs/%d", idleID)
	var j reclaimJob
	eventually(t, 15*time.Second, "the idle job warned (reclaim_at)", func() bool {
		j = reclaimJob{}
		alice.do(http.MethodGet, path, nil, &j)
		return j.Idle != nil && j.Idle.ReclaimAt != nil
	})
	b := newBrowser(t, srv.URL)
	b.login("alice", "dev")
	page := fmt.Sprintf("/jobs/%d", idleID)
	if _, body := b.get(page); !strings.Contains(body, `id="job-reclaim"`) || !strings.Contains(body, `id="job-keep-alive"`) {
		t.Errorf("the idle job's page shows no reclaim warning or keep-alive button")
	}
	// The team's page (its lead's view of its members' jobs) lists the
	// idle job with when it will be stopped, as the job's page says it
	// (audit3: the team page said since when only).
	if _, body := b.get("/teams/vision"); !strings.Contains(body, `class="muted idle-reclaim"`) || !strings.Contains(body, "It will be stopped at") {
		t.Errorf("the team page lists the idle job without when it will be stopped")
	}
	// Beyond the team's maximum: refused, naming the field.
	var e struct{ Error string }
	if st := alice.do(http.MethodPost, path+"/keep-alive", map[string]any{"hours": 2}, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, "hours") {
		t.Errorf("keep alive 2h over a 1h maximum: status %d %q, want 400 naming hours", st, e.Error)
	}
	if st := bob.do(http.MethodPost, path+"/keep-alive", map[string]any{"hours": 0.001}, nil); st != http.StatusNotFound {
		t.Errorf("another team's member kept the job alive: status %d, want 404 (to him the job does not exist)", st)
	}
	// Kept alive from its page for 0.001 h (3.6 s): no warning meanwhile.
	status, at, _ := b.post(page+"/keep-alive", url.Values{"_csrf": {b.csrf(page)}, "hours": {"0.001"}})
	if status != http.StatusOK || at != page {
		t.Fatalf("keep alive from the page: status %d at %s", status, at)
	}
	// And from the CLI, within the team's maximum (this one counts).
	c := newCLI(t, srv.URL)
	env := []string{"GPUPORTAL_TOKEN=" + alice.token}
	c.fails(env, []string{"--hours"}, "session", "keep-alive", fmt.Sprint(idleID), "--hours", "0")
	c.fails(env, []string{"hours 2", "maximum keep-alive"}, "session", "keep-alive", fmt.Sprint(idleID), "--hours", "2")
	if out := c.ok(env, "session", "keep-alive", fmt.Sprint(idleID), "--hours", "0.001"); !strings.Contains(out, "kept alive until") {
		t.Errorf("session keep-alive printed %q", out)
	}
	kept := time.Now()
	j = reclaimJob{}
	alice.do(http.MethodGet, path, nil, &j)
	if j.State != "running" || j.Idle == nil || j.Idle.KeepAliveUntil == nil || j.Idle.ReclaimAt != nil {
		t.Errorf("kept alive: state %s, idle %+v; want running, keep_alive_until and no reclaim_at", j.State, j.Idle)
	}
	j = waitJob2(t, alice, path, 15*time.Second)
	if since := time.Since(kept); since < 3*time.Second {
		t.Errorf("reclaimed %v after a 3.6s keep-alive", since)
	}
	if _, body := b.get(page); !strings.Contains(body, "reclaimed: idle since") {
		t.Errorf("the reclaimed job's page does not say why it was preempted")
	}
	// The reclaimed job went to the back of the queue: its GPU starts the
	// job that was waiting, and it waits behind it.
	eventually(t, 15*time.Second, "the waiting job running on the reclaimed GPU", func() bool {
		return bob.job(nextID).State == "running"
	})
	if r := alice.job(idleID); r.State != "queued" && r.State != "preempted" {
		t.Errorf("the reclaimed job is %s, want waiting behind the job that took its GPU", r.State)
	}
	// Accounting counts what /metrics counts: the server started at 0,
	// so the counter's value is its increase over this one reclaim.
	counted, ok := metricValue(metricsText(t, srv.URL), "gpuportal_reclaimed_idle_gpu_seconds_total", "vision")
	if !ok || !(counted > 0) {
		t.Fatalf("/metrics has no reclaimed GPU-seconds for vision (%v)", counted)
	}
	var rep struct {
		Rows []struct {
			Team              string  `json:"team"`
			ReclaimedGPUHours float64 `json:"reclaimed_gpu_hours"`
		} `json:"rows"`
		Total struct {
			ReclaimedGPUHours float64 `json:"reclaimed_gpu_hours"`
		} `json:"total"`
	}
	if st := admin.do(http.MethodGet, "/api/v1/accounting?by=team&period=range", nil, &rep); st != http.StatusOK {
		t.Fatalf("accounting: status %d", st)
	}
	for _, r := range rep.Rows {
		want := 0.0
		if r.Team == "vision" {
			want = counted / 3600
		}
		// The API rounds hours to 4 decimals.
		if math.Abs(r.ReclaimedGPUHours-want) > 0.00005 {
			t.Errorf("accounting: team %s reclaimed %v GPU-hours, /metrics %v GPU-seconds (%v h)", r.Team, r.ReclaimedGPUHours, counted, want)
		}
	}
	t.Logf("reclaimed: /metrics %.3f GPU-s (%.4f GPU-h), accounting %.4f GPU-h", counted, counted/3600, rep.Total.ReclaimedGPUHours)
	if math.Abs(rep.Total.ReclaimedGPUHours-counted/3600) > 0.00005 {
		t.Errorf("accounting total: %v reclaimed GPU-hours, /metrics %v GPU-seconds", rep.Total.ReclaimedGPUHours, counted)
	}
	ab := newBrowser(t, srv.URL)
	ab.login("admin", "dev")
	if _, body := ab.get("/accounting?by=team&period=range"); !strings.Contains(body, fmt.Sprintf(`data-field="reclaimed">%.2f<`, counted/3600)) {
		t.Errorf("the accounting page does not show %.2f reclaimed GPU-hours", counted/3600)
	}
	if _, body := ab.get("/admin"); !strings.Contains(body, "job.keep-alive") || !strings.Contains(body, "team.idle_policy") {
		t.Errorf("the keep-alive or the idle policy is not in the audit log on /admin")
	}
	// Its team's lead was told, when it was warned, by the webhook the
	// lead set, naming the job and its owner (checked last: the job is
	// reclaimed a grace after the warning, sooner than a delivery may come).
	eventually(t, 15*time.Second, "the lead's idle notification", func() bool { return len(leadHook.requests()) > 0 })
	if r := leadHook.requests()[0]; !r.verified || !strings.Contains(r.body, `"event":"idle"`) ||
		!strings.Contains(r.body, fmt.Sprintf("Job %d (idle) of alice holds idle GPUs", idleID)) {
		t.Errorf("the lead's idle notification: %+v", r)
	}
}

// waitJob2 waits for the job at path to be preempted, and returns it.
func waitJob2(t *testing.T, a *api, path string, timeout time.Duration) reclaimJob {
	t.Helper()
	var j reclaimJob
	eventually(t, timeout, path+" preempted", func() bool {
		j = reclaimJob{}
		a.do(http.MethodGet, path, nil, &j)
		return j.Preemptions > 0
	})
	return j
}

// TestSessionPolicy: team vision's lead gives its sessions a maximum of
// 2 hours and 1 GPU of interactive priority (API); alice's session gets
// the maximum as its time limit, and one asking for more is refused
// naming time_limit; on the one GPU, held by alice's running job, her
// session that asks for priority waits ahead of her batch job submitted
// before it, which says why.
func TestSessionPolicy(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80")
	lead := newAPI(t, srv.URL, "lead", "dev")
	alice := newAPI(t, srv.URL, "alice", "dev")
	var team struct {
		SessionPolicy struct {
			MaxSessionHours float64 `json:"max_session_hours"`
			PriorityGPUs    int     `json:"priority_gpus"`
		} `json:"session_policy"`
	}
	if st := lead.do(http.MethodPut, "/api/v1/teams/vision/session-policy", map[string]any{"max_session_hours": 2, "priority_gpus": 1}, &team); st != http.StatusOK ||
		team.SessionPolicy.MaxSessionHours != 2 || team.SessionPolicy.PriorityGPUs != 1 {
		t.Fatalf("set vision's session policy: status %d, %+v", st, team.SessionPolicy)
	}
	var e struct{ Error string }
	if st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "long", "gpus": 1, "time_limit": "3:00:00", "session": map[string]any{"type": "terminal"}}, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, "time_limit") {
		t.Errorf("a 3h session over a 2h maximum: status %d %q, want 400 naming time_limit", st, e.Error)
	}
	holder := submit(t, alice, map[string]any{"name": "holder", "gpus": 1, "sim": map[string]any{"duration_s": 600}})
	waitJob(t, alice, holder, 15*time.Second, "running")
	batch := submit(t, alice, map[string]any{"name": "batch", "gpus": 1, "sim": map[string]any{"duration_s": 600}})
	session := submit(t, alice, map[string]any{"name": "nb", "gpus": 1, "session": map[string]any{"type": "terminal", "priority": true}})
	var s struct {
		TimeLimitS *float64 `json:"time_limit_s"`
		Session    *struct {
			Priority bool `json:"priority"`
		} `json:"session"`
	}
	alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", session), nil, &s)
	if s.TimeLimitS == nil || *s.TimeLimitS != 7200 || s.Session == nil || !s.Session.Priority {
		t.Errorf("the session: time limit %v, session %+v; want the team's 2 hours and its priority", s.TimeLimitS, s.Session)
	}
	want := fmt.Sprintf("behind alice's interactive session %d", session)
	eventually(t, 15*time.Second, "the batch job waiting behind the session", func() bool {
		return strings.Contains(alice.job(batch).Reason, want)
	})
}

// TestIdleReclaimSession: a terminal session on the one simulated GPU,
// which reads 0% utilization, with a job waiting behind it, in a team
// that reclaims idle sessions (the default) and whose own idle rule is 2
// seconds (the server's, --idle-after, stays 30 minutes), with
// --idle-reclaim-grace 3s: the session is warned (reclaim_at), then
// stopped after the grace, ending cancelled with reason "reclaimed: idle
// since HH:MM", and its GPU starts the waiting job.
func TestIdleReclaimSession(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80", "--idle-reclaim-grace", "3s")
	admin := newAPI(t, srv.URL, "admin", "dev")
	alice := newAPI(t, srv.URL, "alice", "dev") // vision
	bob := newAPI(t, srv.URL, "bob", "dev")     // nlp
	if st := admin.do(http.MethodPut, "/api/v1/teams/vision/idle-policy", map[string]any{"reclaim_sessions": true, "idle_after_s": 2}, nil); st != http.StatusOK {
		t.Fatalf("set vision's idle rule: status %d", st)
	}
	sid := submit(t, alice, map[string]any{"name": "shell", "gpus": 1, "session": map[string]any{"type": "terminal"}})
	waitJob(t, alice, sid, 15*time.Second, "running")
	nextID := submit(t, bob, map[string]any{"name": "next", "gpus": 1, "sim": map[string]any{"duration_s": 600}})
	path := fmt.Sprintf("/api/v1/jobs/%d", sid)
	warned := false
	eventually(t, 20*time.Second, "the idle session warned, then stopped", func() bool {
		var j reclaimJob
		alice.do(http.MethodGet, path, nil, &j)
		if j.State == "running" && j.Idle != nil && j.Idle.ReclaimAt != nil {
			warned = true
		}
		return j.State == "cancelled"
	})
	if !warned {
		t.Errorf("the session was stopped without being warned first (no reclaim_at seen while it ran)")
	}
	if j := alice.job(sid); !strings.Contains(j.Reason, "reclaimed: idle since") {
		t.Errorf("the reclaimed session's reason is %q", j.Reason)
	}
	eventually(t, 15*time.Second, "the waiting job running on the session's GPU", func() bool {
		return bob.job(nextID).State == "running"
	})
}
