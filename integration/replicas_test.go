package integration

import (
	"bufio"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apitypes "github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// role is what a replica's /healthz says it is: "leader" or "follower".
func role(base string) string {
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var h struct{ Role string }
	if json.NewDecoder(resp.Body).Decode(&h) != nil {
		return ""
	}
	return h.Role
}

// leaderGauge reads gpuportal_leader from a replica's /metrics.
func leaderGauge(t *testing.T, base string) string {
	t.Helper()
	return metric(t, base, "gpuportal_leader")
}

// metric reads one series from a replica's /metrics: "missing" when absent.
func metric(t *testing.T, base, series string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return v
		}
	}
	return "missing"
}

// TestTwoReplicasOneDatabase runs two servers on one PostgreSQL database:
// one leads (schedules, takes the agent), the other follows (serves the
// API, refuses agents). A job submitted through the follower runs, and a
// cordon and uncordon through the follower reach the leader; after
// the leader is killed, the follower takes over, the agent reconnects to
// it, and the job finishes, never having run twice at once.
func TestTwoReplicasOneDatabase(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	dsn := modelstest.PostgresDSN(t)
	key := sessionKeyFile(t)
	replica := func() *server {
		return startAgentServer(t, "--data", t.TempDir(), "--db", dsn, "--heartbeat-timeout", "30s", "--webhook-allow", webhookAllow,
			"--session-key-file", key)
	}
	a := replica()
	eventually(t, 10*time.Second, "the first replica to lead", func() bool { return role(a.URL) == "leader" })
	b := replica()
	eventually(t, 10*time.Second, "the second replica to follow", func() bool { return role(b.URL) == "follower" })
	if g := leaderGauge(t, a.URL) + "/" + leaderGauge(t, b.URL); g != "1/0" {
		t.Errorf("gpuportal_leader of leader/follower = %s, want 1/0", g)
	}

	// The follower refuses agents with 503 and says why.
	req, _ := http.NewRequest(http.MethodGet, b.URL+wire.Path, nil)
	req.Header.Set("Authorization", "Bearer "+agentToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var refusal struct{ Error string }
	_ = json.NewDecoder(resp.Body).Decode(&refusal)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(refusal.Error, "follower") {
		t.Errorf("agent on the follower: %d %q; want 503 naming the follower", resp.StatusCode, refusal.Error)
	}

	// The agent is given the follower first: it must skip to the leader.
	ag := startAgent(t, b.URL+","+a.URL, "replica-box")
	waitGPUs(t, a.URL, 2)

	// The follower shows the leader's start forecast of a waiting job
	// (only the leader's engine forecasts), not "unknown". Forecasts
	// learn run times from three finished jobs first.
	lead := newAPI(t, a.URL, "alice", "dev")
	var short []int64
	for i := range 3 {
		short = append(short, submit(t, lead, map[string]any{"name": fmt.Sprintf("short-%d", i), "gpus": 1, "sim": map[string]any{"duration_s": 1}}))
	}
	for _, s := range short {
		lead.waitState(s, 15*time.Second, "succeeded")
	}
	blocker := submit(t, lead, map[string]any{"name": "blocker", "gpus": 2, "sim": map[string]any{"duration_s": 60}})
	lead.waitState(blocker, 15*time.Second, "running")
	waiter := submit(t, lead, map[string]any{"name": "waiter", "gpus": 2, "sim": map[string]any{"duration_s": 5}})
	followerForecast(t, lead, newAPI(t, b.URL, "alice", "dev"), waiter)
	for _, j := range []int64{waiter, blocker} {
		if st := lead.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", j), nil, nil); st >= 300 {
			t.Fatalf("cancel job %d: status %d", j, st)
		}
		lead.waitState(j, 15*time.Second, "cancelled")
	}

	// Submits and cancels through the follower reach the leader; so do
	// notification settings, and only the leader delivers.
	alice := newAPI(t, b.URL, "alice", "dev")
	h := newHook(t, "", func(int) int { return http.StatusOK })
	if st := alice.do(http.MethodPut, "/api/v1/me/notifications", map[string]any{"webhook_url": h.srv.URL,
		"events": []string{"started", "succeeded", "cancelled"}}, nil); st != http.StatusOK {
		t.Fatalf("notification settings through the follower: %d", st)
	}
	const sent = `gpuportal_notification_attempts_total{channel="webhook",outcome="sent"}`
	id := submit(t, alice, map[string]any{"name": "survivor", "gpus": 1, "sim": map[string]any{"duration_s": 20}})
	doomed := submit(t, alice, map[string]any{"name": "doomed", "gpus": 1, "sim": map[string]any{"duration_s": 600}})
	alice.waitState(id, 15*time.Second, "running")
	alice.waitState(doomed, 15*time.Second, "running")
	if st := alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", doomed), nil, nil); st >= 300 {
		t.Fatalf("cancel through the follower: status %d", st)
	}
	if j := alice.waitState(doomed, 15*time.Second, "cancelled"); !strings.Contains(j.Reason, "alice") {
		t.Errorf("cancelled job's reason = %q, want who cancelled it", j.Reason)
	}

	// An admin cordons the agent's machine through the follower: it
	// records the cordon in the database, and the leader's next pass
	// applies it. The leader shows the machine cordoned and places no new
	// job there, until an uncordon through the follower.
	adminA, adminB := newAPI(t, a.URL, "admin", "dev"), newAPI(t, b.URL, "admin", "dev")
	var answer struct{ State, Note string }
	if st := adminB.do(http.MethodPost, "/api/v1/nodes/replica-box/cordon", nil, &answer); st != http.StatusOK ||
		answer.State != "cordoned" || !strings.Contains(answer.Note, "leader's next pass") {
		t.Fatalf("cordon on the follower: %d %+v, want 200, cordoned, on the leader's next pass", st, answer)
	}
	cordoned := time.Now()
	eventually(t, 5*time.Second, "the leader to show replica-box cordoned", func() bool {
		return nodes(t, adminA)["replica-box"].State == "cordoned"
	})
	t.Logf("a cordon through the follower took effect on the leader after %v", time.Since(cordoned).Round(10*time.Millisecond))
	late := submit(t, alice, map[string]any{"name": "late", "gpus": 1, "sim": map[string]any{"duration_s": 1}})
	afterPasses(t, a.URL, 3) // the leader's passes, with a GPU free
	if j := alice.job(late); j.State != "queued" {
		t.Errorf("job %d on a cordoned machine with a free GPU: %s, want queued", late, j.State)
	}
	if st := adminB.do(http.MethodPost, "/api/v1/nodes/replica-box/uncordon", nil, &answer); st != http.StatusOK || answer.State != "ready" {
		t.Fatalf("uncordon on the follower: %d %+v, want 200, ready", st, answer)
	}
	alice.waitState(late, 10*time.Second, "running", "succeeded")
	if st := nodes(t, adminA)["replica-box"].State; st != "ready" {
		t.Errorf("replica-box on the leader after the uncordon is %s, want ready", st)
	}

	eventually(t, 10*time.Second, "the leader to deliver the notifications", func() bool { return len(h.requests()) >= 4 })
	if got := metric(t, b.URL, sent); got != "missing" {
		t.Errorf("the follower delivered %s notifications; only the leader may", got)
	}
	if got := metric(t, a.URL, sent); got == "missing" || got == "0" {
		t.Errorf("the leader delivered %s notifications", got)
	}

	// The leader's own cordon: the database keeps it for the next leader.
	if st := adminA.do(http.MethodPost, "/api/v1/nodes/replica-box/cordon", nil, nil); st != http.StatusOK {
		t.Fatalf("cordon on the leader: %d", st)
	}

	a.kill()
	killed := time.Now()
	eventually(t, 10*time.Second, "the follower to take over", func() bool { return role(b.URL) == "leader" })
	took := time.Since(killed)
	waitGPUs(t, b.URL, 2)
	if st := nodes(t, adminB)["replica-box"].State; st != "cordoned" {
		t.Errorf("replica-box on the new leader is %s, want still cordoned", st)
	}
	reconnected := time.Since(killed)
	t.Logf("leader killed: the follower led after %v, the agent reconnected after %v",
		took.Round(10*time.Millisecond), reconnected.Round(10*time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("takeover took %v, want a few seconds", took)
	}

	j := alice.waitState(id, 30*time.Second, "succeeded")
	var history []struct{ State, Detail string }
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/history", id), nil, &history); st != http.StatusOK {
		t.Fatalf("history: status %d", st)
	}
	runs := 0
	for _, h := range history {
		if h.State == "running" && strings.HasPrefix(h.Detail, "on ") { // a start, not a note
			runs++
		}
	}
	if runs != 1 || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Errorf("job %d: %d runs in its history %v, exit %v; want one run, through the takeover, exit 0", id, runs, history, j.ExitCode)
	}
	// The new leader told of the success.
	eventually(t, 10*time.Second, "the new leader to tell of the success", func() bool {
		for _, r := range h.requests() {
			if strings.Contains(r.body, `"event":"succeeded","at"`) && strings.Contains(r.body, fmt.Sprintf(`"job":{"id":%d,`, id)) {
				return true
			}
		}
		return false
	})
	if got := metric(t, b.URL, sent); got == "missing" {
		t.Errorf("the new leader delivered no notification")
	}
	if n := strings.Count(ag.output(), fmt.Sprintf(`msg="job started" job=%d `, id)); n != 1 {
		t.Errorf("the agent started job %d %d times, want once", id, n)
	}
}

// TestLeaderThatLosesItsLockStepsDown ends the leader's lock session
// from the database side, as a network cut or a database restart would,
// and takes the lock at once, as another replica quicker than the old
// leader would. The old leader, which cannot take its lock back, steps
// down to a follower without exiting (issue 32): it says why, closes its
// agent's connection and takes agents no more. While the lock is held
// elsewhere no replica leads; once it is free one does, and the agent,
// given both servers, reconnects to it within its lease with its job,
// which runs once. (The leader that takes its lock back, after a
// database outage, is TestFaults/DatabaseStopped.)
func TestLeaderThatLosesItsLockStepsDown(t *testing.T) {
	dsn := modelstest.PostgresDSN(t)
	key := sessionKeyFile(t)
	a := startAgentServer(t, "--data", t.TempDir(), "--db", dsn, "--session-key-file", key)
	eventually(t, 10*time.Second, "the first replica to lead", func() bool { return role(a.URL) == "leader" })
	// A replica with a key of its own (its data folder's) would derive
	// other sessions' secrets: it refuses to start, and says why.
	refused, err := exec.Command(binary, "serve", "--dev", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--db", dsn).CombinedOutput()
	if err == nil || !strings.Contains(string(refused), "give every server of the database the same key file") {
		t.Errorf("a replica with another session key: %v\n%s", err, refused)
	}
	b := startAgentServer(t, "--data", t.TempDir(), "--db", dsn, "--session-key-file", key)
	eventually(t, 10*time.Second, "the second replica to follow", func() bool { return role(b.URL) == "follower" })
	ag := startAgent(t, a.URL+","+b.URL, "stepdown-box")
	waitGPUs(t, a.URL, 2)
	traces := t.TempDir()
	alice := newAPI(t, a.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "through", "gpus": 1, "command": tracedJob(traces, 60)})
	traceStarted(t, traces, id, "")

	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	thief, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer thief.Close()
	var ended, took bool
	// Ended, waiting up to 5 s for the session to be gone, and the lock
	// taken before the old leader's next try (every 250 ms).
	err = db.QueryRowContext(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&ended)
	if err != nil || !ended {
		t.Fatalf("end the leader's lock session: %v, %v", ended, err)
	}
	if err := thief.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", schedulerLock).Scan(&took); err != nil || !took {
		t.Fatalf("take the lock: %v, %v", took, err)
	}
	eventually(t, 10*time.Second, "the old leader to step down", func() bool {
		return strings.Contains(a.output(), "stepped down") && role(a.URL) == "follower"
	})
	for _, want := range []string{"lost the leader lock", "another replica took the leader lock", "stepping down to a follower"} {
		if !strings.Contains(a.output(), want) {
			t.Errorf("the old leader's output lacks %q", want)
		}
	}
	if got := metric(t, a.URL, "gpuportal_leader") + metric(t, a.URL, "gpuportal_leader_fenced"); got != "00" {
		t.Errorf("the old leader's gpuportal_leader and gpuportal_leader_fenced: %s; want 0 and 0", got)
	}
	if got := role(b.URL); got != "follower" {
		t.Errorf("the follower is %q while another holds the lock", got)
	}
	if _, err := thief.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", schedulerLock); err != nil {
		t.Fatal(err)
	}
	var leader *server
	eventually(t, 15*time.Second, "a replica to lead", func() bool {
		for _, s := range []*server{a, b} {
			if role(s.URL) == "leader" {
				leader = s
				return true
			}
		}
		return false
	})
	t.Logf("after the lock was free, %s led", map[bool]string{true: "the old leader", false: "the other replica"}[leader == a])
	waitGPUs(t, leader.URL, 2)
	newAPI(t, leader.URL, "alice", "dev").waitState(id, time.Minute, "succeeded")
	select {
	case <-a.done:
		t.Errorf("the old leader exited after it stepped down:\n%s", a.output())
	default:
	}
	for _, sp := range checkTraces(t, traces) {
		if sp.run != 1 || sp.lines != 60 {
			t.Errorf("%v: want the job's first run, all 60 ticks of it, through the step down", sp)
		}
	}
	if n := strings.Count(ag.output(), fmt.Sprintf(`msg="job started" job=%d `, id)); n != 1 {
		t.Errorf("the agent started job %d %d times, want once", id, n)
	}
}

// schedulerLock is the leader lock's key (models/leader.go).
const schedulerLock int64 = 0x677075706f72746c

// followerForecast waits until the leader forecasts job id's start (not
// "unknown"), and the follower shows the same forecast.
func followerForecast(t *testing.T, leader, follower *api, id int64) {
	t.Helper()
	get := func(c *api) apitypes.Forecast {
		var j struct{ Forecast *apitypes.Forecast }
		if st := c.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK {
			t.Fatalf("job %d: status %d", id, st)
		}
		if j.Forecast == nil {
			t.Fatalf("job %d started before the check: it has no forecast", id)
		}
		return *j.Forecast
	}
	near := func(a, b *time.Time) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return a.Sub(*b).Abs() < time.Millisecond // the database keeps microseconds
	}
	var l, f apitypes.Forecast
	defer func() {
		if t.Failed() {
			t.Logf("forecast of job %d: leader %+v, follower %+v", id, l, f)
		}
	}()
	eventually(t, 20*time.Second, fmt.Sprintf("the leader's forecast of job %d, not unknown, on the follower", id), func() bool {
		l, f = get(leader), get(follower)
		return l.State != "unknown" && l.State == f.State && l.Reason == f.Reason &&
			near(l.Earliest, f.Earliest) && near(l.Likely, f.Likely) && near(l.Latest, f.Latest)
	})
}

// sessionKeyFile writes a session key file for replicas to share, as an
// operator would (openssl rand -base64 32), and returns its path.
func sessionKeyFile(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "session.key")
	if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
