package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestBrowserSubmitRunsToSuccess is the newcomer's first experience: log in
// as alice, submit a simulated job with the form, watch it run and succeed
// with its JCT on the job page.
func TestBrowserSubmitRunsToSuccess(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir())
	b := newBrowser(t, srv.URL)

	if status, body := b.get("/jobs"); status != http.StatusOK || !strings.Contains(body, "Log in") {
		t.Fatalf("anonymous /jobs: want the login page, got %d", status)
	}
	b.login("alice", "dev")
	status, path, body := b.post("/jobs", url.Values{
		"_csrf": {b.csrf("/jobs/new")}, "name": {"resnet-smoke"}, "team": {"vision"},
		"gpus": {"2"}, "kind": {"sim"}, "duration_s": {"2"},
	})
	if status != http.StatusOK || !strings.HasPrefix(path, "/jobs/") {
		t.Fatalf("submit: status %d at %s:\n%s", status, path, body)
	}
	var id int64
	if _, err := fmt.Sscanf(path, "/jobs/%d", &id); err != nil {
		t.Fatalf("job page path %q: %v", path, err)
	}

	a := newAPI(t, srv.URL, "alice", "dev")
	j := a.waitState(id, 30*time.Second, "succeeded")
	if j.StartedAt == nil || j.FinishedAt == nil || j.JCTS == nil || *j.JCTS < 2 {
		t.Errorf("finished job = %+v; want start, finish and a JCT of at least its 2s run", j)
	}
	if j.User != "alice" || j.Team != "vision" || len(j.Placement) != 2 {
		t.Errorf("job owner/placement = %s/%s %v", j.User, j.Team, j.Placement)
	}
	_, page := b.get(path)
	for _, want := range []string{"resnet-smoke", "succeeded", "JCT"} {
		if !strings.Contains(page, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
}

// TestFormRejectsBadInput shows field errors next to the fields.
func TestFormRejectsBadInput(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir())
	b := newBrowser(t, srv.URL)
	b.login("bob", "dev")
	status, _, body := b.post("/jobs", url.Values{
		"_csrf": {b.csrf("/jobs/new")}, "name": {""}, "team": {"nlp"},
		"gpus": {"0"}, "kind": {"command"}, "command": {`python "unclosed`},
	})
	if status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", status)
	}
	for _, want := range []string{"is required", "must be at least 1", "unclosed"} {
		if !strings.Contains(body, want) {
			t.Errorf("form errors lack %q", want)
		}
	}
	// Without the CSRF token the form is refused.
	if status, _, _ := b.post("/jobs", url.Values{"name": {"x"}, "gpus": {"1"}}); status != http.StatusBadRequest && status != http.StatusForbidden {
		t.Errorf("submit without CSRF token: status %d, want 400 or 403", status)
	}
}

// TestAPIContract checks the REST API's status codes and error messages.
func TestAPIContract(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--dev-token", "test-dev-token", "--max-retries", "0")
	alice := newAPI(t, srv.URL, "alice", "dev")
	bob := newAPI(t, srv.URL, "bob", "dev")
	admin := &api{t: t, base: srv.URL, token: "test-dev-token"}
	anon := &api{t: t, base: srv.URL}

	var created jobView
	if st := alice.do("POST", "/api/v1/jobs", map[string]any{
		"name": "cmd", "team": "vision", "gpus": 1, "command": []string{"sh", "-c", "echo on $CUDA_VISIBLE_DEVICES; exit 3"},
	}, &created); st != http.StatusCreated || created.ID == 0 || created.State != "queued" {
		t.Fatalf("submit: status %d, job %+v", st, created)
	}
	failed := alice.waitState(created.ID, 30*time.Second, "failed")
	if failed.ExitCode == nil || *failed.ExitCode != 3 {
		t.Errorf("exit code = %v, want 3", failed.ExitCode)
	}

	type errBody struct{ Error string }
	tests := []struct {
		name      string
		client    *api
		method    string
		path      string
		body      any
		status    int
		errorHint string
	}{
		{"no token", anon, "GET", "/api/v1/jobs", nil, 401, "token"},
		{"bad token", &api{t: t, base: srv.URL, token: "nope"}, "GET", "/api/v1/jobs", nil, 401, "token"},
		{"missing name", alice.malformed(), "POST", "/api/v1/jobs", map[string]any{"team": "vision", "gpus": 1, "sim": map[string]any{"duration_s": 5}}, 400, "name"},
		{"zero gpus", alice.malformed(), "POST", "/api/v1/jobs", map[string]any{"name": "x", "gpus": 0, "sim": map[string]any{"duration_s": 5}}, 400, "gpus"},
		{"gpus beyond the cluster", alice, "POST", "/api/v1/jobs", map[string]any{"name": "x", "gpus": 64, "sim": map[string]any{"duration_s": 5}}, 400, "gpus"},
		{"gpus not a number", alice.malformed(), "POST", "/api/v1/jobs", `{"name":"x","gpus":"two"}`, 400, "gpus"},
		{"unknown field", alice.malformed(), "POST", "/api/v1/jobs", `{"name":"x","gpus":1,"gpu":2}`, 400, "gpu"},
		{"broken JSON", alice.malformed(), "POST", "/api/v1/jobs", `{"name":`, 400, "JSON"},
		{"no workload", alice, "POST", "/api/v1/jobs", map[string]any{"name": "x", "gpus": 1}, 400, "command"},
		{"negative duration", alice.malformed(), "POST", "/api/v1/jobs", map[string]any{"name": "x", "gpus": 1, "sim": map[string]any{"duration_s": -1}}, 400, "duration_s"},
		{"other team", alice, "POST", "/api/v1/jobs", map[string]any{"name": "x", "team": "nlp", "gpus": 1, "sim": map[string]any{"duration_s": 5}}, 400, "team"},
		{"unknown team", admin, "POST", "/api/v1/jobs", map[string]any{"name": "x", "team": "ghosts", "gpus": 1, "sim": map[string]any{"duration_s": 5}}, 400, "team"},
		{"bad id", alice.malformed(), "GET", "/api/v1/jobs/abc", nil, 400, "id"},
		{"unknown id", alice, "GET", "/api/v1/jobs/999999", nil, 404, "no such job: 999999"},
		// Another team's job is one that does not exist, to its eyes.
		{"other team's job", bob, "GET", fmt.Sprintf("/api/v1/jobs/%d", created.ID), nil, 404, fmt.Sprintf("no such job: %d", created.ID)},
		{"cancel other team's job", bob, "DELETE", fmt.Sprintf("/api/v1/jobs/%d", created.ID), nil, 404, fmt.Sprintf("no such job: %d", created.ID)},
		{"cancel finished job", alice, "DELETE", fmt.Sprintf("/api/v1/jobs/%d", created.ID), nil, 409, "ended"},
		{"all jobs as researcher", alice, "GET", "/api/v1/jobs?scope=all", nil, 403, "admin"},
		{"bad state filter", alice, "GET", "/api/v1/jobs?state=lost", nil, 400, "state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e errBody
			tc.client.t = t
			st := tc.client.do(tc.method, tc.path, tc.body, &e)
			if st != tc.status || !strings.Contains(strings.ToLower(e.Error), strings.ToLower(tc.errorHint)) {
				t.Errorf("status %d error %q; want %d with an error naming %q", st, e.Error, tc.status, tc.errorHint)
			}
		})
	}

	var all []jobView
	if st := admin.do("GET", "/api/v1/jobs?scope=all", nil, &all); st != http.StatusOK || len(all) != 1 {
		t.Errorf("admin list all: status %d, %d jobs", st, len(all))
	}
	var mine []jobView
	if st := bob.do("GET", "/api/v1/jobs", nil, &mine); st != http.StatusOK || len(mine) != 0 {
		t.Errorf("bob sees %d jobs of other teams", len(mine))
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics status %d", resp.StatusCode)
	}
}

// TestCancelRunningJob cancels a running simulated job and a running process.
func TestCancelRunningJob(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--grace", "2s")
	lead := newAPI(t, srv.URL, "lead", "dev")
	alice := newAPI(t, srv.URL, "alice", "dev")
	for _, body := range []map[string]any{
		{"name": "long-sim", "gpus": 1, "sim": map[string]any{"duration_s": 600}},
		{"name": "long-cmd", "gpus": 1, "command": "sleep 600"},
	} {
		var j jobView
		if st := alice.do("POST", "/api/v1/jobs", body, &j); st != http.StatusCreated {
			t.Fatalf("submit %v: status %d", body["name"], st)
		}
		alice.waitState(j.ID, 30*time.Second, "running")
		// The team's lead may cancel a member's job.
		if st := lead.do("DELETE", fmt.Sprintf("/api/v1/jobs/%d", j.ID), nil, nil); st != http.StatusOK {
			t.Fatalf("cancel %s: status %d", j.Name, st)
		}
		got := alice.waitState(j.ID, 30*time.Second, "cancelled")
		if got.FinishedAt == nil || !strings.Contains(got.Reason, "lead") {
			t.Errorf("cancelled job = %+v", got)
		}
	}
}

// TestRestartLosesNothing stops the server while jobs wait and run, starts
// it again on the same data, and checks every job is still there and runs
// to the end: on SQLite (graceful stop) and PostgreSQL (SIGKILL).
func TestRestartLosesNothing(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	for _, tc := range []struct {
		name  string
		db    func(t *testing.T, data string) string
		crash bool
	}{
		{"sqlite, graceful stop", func(t *testing.T, data string) string { return "sqlite:" + filepath.Join(data, "g.db") }, false},
		{"postgres, crash", func(t *testing.T, _ string) string { return modelstest.PostgresDSN(t) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			dsn := tc.db(t, data)
			args := []string{"--data", data, "--db", dsn, "--sim-gpus", "1x2x80", "--heartbeat-timeout", "2s"}
			srv := startServer(t, args...)
			a := newAPI(t, srv.URL, "alice", "dev")
			var ids []int64
			for i := range 3 {
				var j jobView
				// Two 2-GPU jobs on a 2-GPU cluster: the second waits.
				if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": fmt.Sprint("j", i), "gpus": 2, "sim": map[string]any{"duration_s": 3}}, &j); st != http.StatusCreated {
					t.Fatalf("submit: %d", st)
				}
				ids = append(ids, j.ID)
			}
			a.waitState(ids[0], 30*time.Second, "running")
			if tc.crash {
				srv.kill()
			} else {
				srv.stop()
			}
			srv2 := startServer(t, args...)
			a2 := newAPI(t, srv2.URL, "alice", "dev")
			for _, id := range ids {
				j := a2.waitState(id, 60*time.Second, "succeeded")
				if j.JCTS == nil {
					t.Errorf("job %d has no JCT after restart", id)
				}
			}
			if j := a2.job(ids[0]); j.StartedAt == nil {
				t.Errorf("first job lost its first start time")
			}
		})
	}
}

// TestFailedJobIsRetried runs a job that asked for retries and fails
// once, then finds its checkpoint and succeeds; one that fails the same
// way twice, which is not retried a third time; and one that asked for
// none, whose own failure is final.
func TestFailedJobIsRetried(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--retry-backoff", "1s")
	a := newAPI(t, srv.URL, "alice", "dev")
	var flaky, broken, once jobView
	script := `if [ -f "$GPUPORTAL_CHECKPOINT_DIR/seen" ]; then echo resumed; else touch "$GPUPORTAL_CHECKPOINT_DIR/seen"; exit 7; fi`
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "flaky", "gpus": 1, "command": []string{"sh", "-c", script}, "retries": 3}, &flaky); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "broken", "gpus": 1, "command": "sh -c 'exit 2'", "retries": 3}, &broken); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "once", "gpus": 1, "command": []string{"sh", "-c", script}}, &once); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	if j := a.waitState(once.ID, 30*time.Second, "failed", "succeeded"); j.State != "failed" || j.Failures != 0 || j.ExitCode == nil || *j.ExitCode != 7 {
		t.Errorf("a job that asked for no retries: %s, %d failures; want its own failure final", j.State, j.Failures)
	}
	got := a.waitState(flaky.ID, 30*time.Second, "succeeded")
	if got.Failures != 1 {
		t.Errorf("flaky job: %d failures, want 1", got.Failures)
	}
	bad := a.waitState(broken.ID, 30*time.Second, "failed")
	if bad.Failures != 1 || !strings.Contains(bad.Reason, "not retried") {
		t.Errorf("broken job: failures %d, reason %q; want one retry, then given up", bad.Failures, bad.Reason)
	}
	var history []struct{ State, Detail string }
	if st := a.do("GET", fmt.Sprintf("/api/v1/jobs/%d/history", flaky.ID), nil, &history); st != http.StatusOK {
		t.Fatalf("history: %d", st)
	}
	var states, notes []string
	for _, h := range history {
		if strings.HasPrefix(h.Detail, "run 2 ") {
			notes = append(notes, h.Detail) // what run 2 resumed from: a note, not a change of state
			continue
		}
		states = append(states, h.State)
	}
	if strings.Join(states, ",") != "queued,running,queued,running,succeeded" {
		t.Errorf("history = %v", states)
	}
	if len(notes) != 1 {
		t.Errorf("history notes of run 2 %q; want one: what it resumed from", notes)
	}
}

// TestTemplates saves a job as a template from its page and submits from it.
func TestTemplates(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir())
	b := newBrowser(t, srv.URL)
	b.login("alice", "dev")
	status, path, _ := b.post("/jobs", url.Values{
		"_csrf": {b.csrf("/jobs/new")}, "name": {"bert-finetune"}, "gpus": {"2"},
		"kind": {"command"}, "command": {`python train.py --lr "3e-5"`}, "model": {"bert"},
	})
	if status != http.StatusOK {
		t.Fatalf("submit: %d", status)
	}
	status, path, body := b.post(path+"/template", url.Values{"_csrf": {b.csrf(path)}, "template_name": {"bert ft"}})
	if status != http.StatusOK || path != "/jobs/new" {
		t.Fatalf("save template: status %d at %s", status, path)
	}
	for _, want := range []string{`value="bert-finetune"`, `python train.py --lr 3e-5`, `<option value="bert" selected`, "Filled in from the template bert ft"} {
		if !strings.Contains(body, want) {
			t.Errorf("form from template lacks %s", want)
		}
	}
	a := newAPI(t, srv.URL, "alice", "dev")
	var ts []struct {
		ID   int64
		Name string
		Job  struct {
			Command []string
			GPUs    int
		}
	}
	if st := a.do("GET", "/api/v1/templates", nil, &ts); st != http.StatusOK || len(ts) != 1 || ts[0].Job.GPUs != 2 ||
		strings.Join(ts[0].Job.Command, "|") != "python|train.py|--lr|3e-5" {
		t.Errorf("templates API: %d %+v", st, ts)
	}
}
