package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestTeamSessionLimits: team vision's lead, on the team page in a
// browser (1440 and 390 px), caps the GPUs its sessions may ask for at
// once at 2; alice's second session past it is refused by the CLI naming
// --gpus, while a batch job is not bound by it; a session she stops
// gives its GPUs back to the cap at once, though it is still stopping.
// The lead then turns sessions off: alice's session from the submit form
// is refused there, saying why, and her team page says so; bob's team is
// not bound by vision's policy.
func TestTeamSessionLimits(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x4x80")
	alice := newAPI(t, srv.URL, "alice", "dev")
	browser := newTabFor(t, 3*time.Minute)
	startChromium(t, browser)

	for _, vp := range viewports {
		sc := tabAs(t, browser, srv.URL, "lead", vp)
		if err := chromedp.Do(sc.ctx, chromedp.Navigate(srv.URL+"/teams/vision"), chromedp.WaitVisible(`#team-session-policy`)); err != nil {
			t.Fatal(err)
		}
		steps := []formStep{
			{"a cap below the GPUs with priority", "/teams/vision/session-policy", map[string]string{"max_gpus": "1", "priority_gpus": "2"}, 400,
				"priority_gpus: 2: more than max_gpus, 1"},
			{"a cap of 2", "/teams/vision/session-policy", map[string]string{"sessions": "allowed", "max_gpus": "2", "priority_gpus": "0"}, 200,
				"Session policy saved."},
		}
		for _, st := range steps {
			if err := submitForm(sc, st); err != nil {
				t.Fatal(err)
			}
		}
		now, err := textOf(sc.ctx, `#team-sessions-now`)
		if err != nil || !strings.Contains(now, "up to 2 GPUs at once") {
			t.Errorf("the team page says %q (%v), want the cap", now, err)
		}
		problems, err := sc.check(screen{"team-session-limits-lead", "/teams/vision", 200}, vp, "lead")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("/teams/vision as lead at %s: %s", vp.name, p)
		}
	}

	c := newCLI(t, srv.URL)
	env := []string{"GPUPORTAL_TOKEN=" + alice.token}
	first := strings.TrimSpace(c.ok(env, "session", "start", "--type", "terminal", "--gpus", "1", "-o", "name"))
	c.fails(env, []string{"--gpus", "team vision's sessions may ask for 2 GPUs at once; 1 are asked for already, and this session asks for 2"},
		"session", "start", "--type", "jupyter", "--gpus", "2")
	c.ok(env, "job", "submit", "--name", "batch", "--gpus", "3", "--sim-duration", "10m")
	id := strings.TrimPrefix(first, "job/")
	eventually(t, 30*time.Second, "the first session running", func() bool {
		var j jobView
		alice.do(http.MethodGet, "/api/v1/jobs/"+id, nil, &j)
		return j.State == "running"
	})
	c.ok(env, "session", "stop", id)
	second := strings.TrimSpace(c.ok(env, "session", "start", "--type", "jupyter", "--gpus", "2", "-o", "name"))
	if !strings.HasPrefix(second, "job/") {
		t.Fatalf("the second session: %q", second)
	}

	// Sessions off, through the API this time.
	lead := newAPI(t, srv.URL, "lead", "dev")
	var team struct {
		SessionPolicy struct {
			Allowed *bool `json:"allowed"`
			MaxGPUs int   `json:"max_gpus"`
		} `json:"session_policy"`
	}
	if st := lead.do(http.MethodPut, "/api/v1/teams/vision/session-policy", map[string]any{"allowed": false, "max_session_hours": 0, "priority_gpus": 0}, &team); st != http.StatusOK ||
		team.SessionPolicy.Allowed == nil || *team.SessionPolicy.Allowed || team.SessionPolicy.MaxGPUs != 0 {
		t.Fatalf("turn vision's sessions off: status %d, %+v", st, team.SessionPolicy)
	}
	c.fails(env, []string{"team vision does not allow interactive sessions"}, "session", "start", "--type", "terminal")
	bob := newAPI(t, srv.URL, "bob", "dev")
	if st := bob.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "nb", "gpus": 1, "session": map[string]any{"type": "jupyter"}}, nil); st != http.StatusCreated {
		t.Errorf("bob's session in nlp: status %d, want 201", st)
	}
	for _, vp := range viewports {
		sc := tabAs(t, browser, srv.URL, "alice", vp)
		err := chromedp.Do(sc.ctx, chromedp.Navigate(srv.URL+"/jobs/new"), chromedp.WaitVisible(`#submit-job`),
			chromedp.Click(`input[name=kind][value=session]`), chromedp.SetValue(`#submit-job [name=name]`, "nb"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := chromedp.RunResponse(sc.ctx, chromedp.Click(`#submit-job button[type=submit]`))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := textOf(sc.ctx, `#kind .field-error`)
		if resp.Status != http.StatusBadRequest || err != nil || !strings.Contains(msg, "team vision does not allow interactive sessions") {
			t.Errorf("the submit form at %s: status %d, the kind's error %q (%v)", vp.name, resp.Status, msg, err)
		}
		// The form said so before it was sent, under the session's fields.
		if terms, err := textOf(sc.ctx, `#session-terms`); err != nil || !strings.Contains(terms, "Team vision does not allow interactive sessions") {
			t.Errorf("the submit form's session terms at %s: %q (%v)", vp.name, terms, err)
		}
		screenshot(t, sc.ctx, "submit-session-off-"+vp.name)
		problems, err := sc.judge(vp, http.StatusBadRequest)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("the submit form's answer at %s: %s", vp.name, p)
		}
		problems, err = sc.check(screen{"team-sessions-off-alice", "/teams/vision", 200}, vp, "alice")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("/teams/vision as alice at %s: %s", vp.name, p)
		}
		now, err := textOf(sc.ctx, `#team-sessions-now`)
		if err != nil || !strings.Contains(now, "not allowed") {
			t.Errorf("alice's team page says %q (%v), want sessions not allowed", now, err)
		}
	}
}
