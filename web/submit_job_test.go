package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

func TestSubmitRunSettingsRejects(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	bobs := &models.Job{Name: "b", Team: "nlp", User: "bob", GPUs: 1, SimDuration: 60}
	if err := ts.store.CreateJob(context.Background(), bobs); err != nil {
		t.Fatal(err)
	}
	const base = `"name":"r","gpus":1,"command":"python3 train.py"`
	tests := []struct {
		name, extra, field string
	}{
		{"reserved variable", `"env":{"GPUPORTAL_JOB_ID":"1"}`, "env"},
		{"the job's GPUs", `"env":{"CUDA_VISIBLE_DEVICES":"0"}`, "env"},
		{"invalid name", `"env":{"1LR":"0.1"}`, "env"},
		{"name with a dash", `"env":{"MY-VAR":"x"}`, "env"},
		{"workdir leaving its folder", `"workdir":"../x"`, "workdir"},
		{"workdir with NUL", `"workdir":"/a\u0000b"`, "workdir"},
		{"time limit not a duration", `"time_limit":"soon"`, "time_limit"},
		{"negative time limit", `"time_limit":"-5m"`, "time_limit"},
		{"too many retries", `"retries":11`, "retries"},
		{"negative retries", `"retries":-1`, "retries"},
		{"unknown dependency kind", `"dependencies":[{"kind":"before","job_id":1}]`, "dependencies"},
		{"dependency on no job", `"dependencies":[{"kind":"after_ok","job_id":999999}]`, "dependencies"},
		{"dependency on a job of another team", fmt.Sprintf(`"dependencies":[{"kind":"after_ok","job_id":%d}]`, bobs.ID), "dependencies"},
		{"bad array", `"array":"5-1"`, "array"},
		{"array limit of 0", `"array":"0-3%0"`, "array"},
		{"parameters with a reserved column", `"array_params":"GPUPORTAL_X\n1\n"`, "array_params"},
		{"parameters of the wrong length", `"array":"0-2","array_params":"LR\n0.1\n"`, "array_params"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", `{`+base+`,`+tc.extra+`}`)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			var e struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(e.Error, tc.field+":") {
				t.Fatalf("error %q does not name %s", e.Error, tc.field)
			}
		})
	}
}

func TestSubmitRunSettingsStored(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	dep := ts.newJob(t)
	body := fmt.Sprintf(`{"name":"r","gpus":1,"command":"python3 train.py","env":{"LR":"3e-4","EMPTY":""},"workdir":"/data/x",
		"time_limit":"1-02:00:00","retries":2,"dependencies":[{"kind":"afterok","job_id":%d}]}`, dep)
	rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", body)
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var j api.Job
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if j.Env["LR"] != "3e-4" || len(j.Env) != 2 || j.Workdir != "/data/x" || j.Retries != 2 ||
		j.TimeLimitS == nil || *j.TimeLimitS != 26*3600 || j.TimeLeftS == nil || *j.TimeLeftS != 26*3600 ||
		len(j.Dependencies) != 1 || j.Dependencies[0] != (job.Dependency{Kind: job.AfterOK, JobID: dep}) {
		t.Errorf("job = %+v", j)
	}
	// While it waits for job dep, nothing forecasts it, and it says why.
	// (The forecast does not repeat the reason: TestForecastDoesNotRepeatTheReason.)
	reason := fmt.Sprintf("waiting for job %d to succeed", dep)
	const want = "forecast once its dependencies or its array let it start"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var got api.Job
		_ = json.Unmarshal(ts.do(t, "alice", http.MethodGet, fmt.Sprint("/api/v1/jobs/", j.ID), "").Body.Bytes(), &got)
		if got.Forecast != nil && got.Forecast.Reason == want && got.Reason == reason {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forecast %+v, reason %q; want %q", got.Forecast, got.Reason, want)
		}
	}
	// Its page says what it runs with.
	page := ts.do(t, "alice", http.MethodGet, fmt.Sprint("/jobs/", j.ID), "").Body.String()
	for _, want := range []string{"LR=3e-4", "/data/x", "1-02:00:00 <span class=\"muted\">· 1-02:00:00 left", "after_ok", fmt.Sprintf("/jobs/%d", dep), "up to 2"} {
		if !strings.Contains(page, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
	// Resubmitting it makes a new job with the same fields, its owner's.
	rec = ts.do(t, "lead", http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/resubmit", j.ID), "")
	var again api.Job
	if err := json.Unmarshal(rec.Body.Bytes(), &again); rec.Code != http.StatusCreated || err != nil {
		t.Fatalf("resubmit: %d %s", rec.Code, rec.Body)
	}
	if again.ID == j.ID || again.User != "alice" || again.Env["LR"] != "3e-4" || *again.TimeLimitS != *j.TimeLimitS ||
		again.Workdir != j.Workdir || len(again.Dependencies) != 1 || again.Retries != 2 {
		t.Errorf("resubmitted %+v", again)
	}
	// The form, filled from the job.
	form := ts.do(t, "alice", http.MethodGet, fmt.Sprint("/jobs/new?from=", j.ID), "").Body.String()
	for _, want := range []string{"LR=3e-4", `value="/data/x"`, `value="1-02:00:00"`, fmt.Sprintf(`value="afterok:%d"`, dep), "python3 train.py"} {
		if !strings.Contains(form, want) {
			t.Errorf("resubmit form lacks %q", want)
		}
	}
	// The form says what a session is promised (issue 30: "Nothing on
	// the form warned of this").
	if !strings.Contains(form, `id="session-promise"`) || !strings.Contains(form, "A session is not preempted by batch jobs") ||
		!strings.Contains(form, "stopped only when idle past your team's rule") || !strings.Contains(form, "or at its time limit") {
		t.Errorf("the submit form does not say what a session is promised")
	}
	if rec := ts.do(t, "bob", http.MethodGet, fmt.Sprint("/jobs/new?from=", j.ID), ""); rec.Code != http.StatusNotFound {
		t.Errorf("bob filled a form from alice's job: %d", rec.Code)
	}
}

func TestTeamTimeLimits(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	if err := ts.store.SetTeamTimeLimits(ctx, "vision", 3600, 7200); err != nil {
		t.Fatal(err)
	}
	submit := func(extra string) (int, api.Job, string) {
		rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", `{"name":"t","gpus":1,"sim":{"duration_s":60}`+extra+`}`)
		var j api.Job
		_ = json.Unmarshal(rec.Body.Bytes(), &j)
		return rec.Code, j, rec.Body.String()
	}
	if code, j, body := submit(""); code != http.StatusCreated || j.TimeLimitS == nil || *j.TimeLimitS != 3600 {
		t.Errorf("without a limit: %d %s; want the team's default of 1h", code, body)
	}
	if code, j, body := submit(`,"time_limit":"2h"`); code != http.StatusCreated || *j.TimeLimitS != 7200 {
		t.Errorf("at the maximum: %d %s", code, body)
	}
	if code, _, body := submit(`,"time_limit":"2h1m"`); code != http.StatusBadRequest || !strings.Contains(body, "time_limit: team vision allows at most 02:00:00") {
		t.Errorf("over the maximum: %d %s", code, body)
	}
}

func TestSubmitArray(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs",
		`{"name":"sweep","gpus":1,"command":"python3 train.py","env":{"LR":"1"},"array":"0-2%2","array_params":"LR,BATCH\n0.1,32\n0.01,64\n0.001,128\n"}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var first api.Job
	if err := json.Unmarshal(rec.Body.Bytes(), &first); err != nil {
		t.Fatal(err)
	}
	if first.Array == nil || first.Array.ID != first.ID || first.Array.Index != 0 || first.Array.Limit != 2 || first.Name != "sweep[0]" {
		t.Fatalf("first task %+v", first)
	}
	rec = ts.do(t, "alice", http.MethodGet, fmt.Sprint("/api/v1/arrays/", first.ID), "")
	var a api.Array
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("array: %d %s", rec.Code, rec.Body)
	}
	if a.Name != "sweep" || len(a.Tasks) != 3 || a.States[job.Queued] != 3 || a.Limit != 2 {
		t.Fatalf("array %+v", a)
	}
	if e := a.Tasks[2].Env; e["LR"] != "0.001" || e["BATCH"] != "128" || len(e) != 2 {
		t.Errorf("task 2's variables %v: its row's, over the job's", e)
	}
	// The jobs list shows the array as one row.
	list := ts.do(t, "alice", http.MethodGet, "/jobs/rows", "").Body.String()
	if strings.Count(list, fmt.Sprintf(`href="/arrays/%d"`, a.ID)) != 2 || !strings.Contains(list, "3 tasks: 3 queued") {
		t.Errorf("jobs list does not group the array: %s", list)
	}
	if page := ts.do(t, "lead", http.MethodGet, fmt.Sprint("/arrays/", a.ID), "").Body.String(); !strings.Contains(page, "at most 2 tasks run at once") ||
		!strings.Contains(page, "Cancel all tasks") || !strings.Contains(page, "<code>LR=0.001 BATCH=128</code>") {
		t.Errorf("array page: %s", page)
	}
	// Cancel all.
	rec = ts.do(t, "alice", http.MethodDelete, fmt.Sprint("/api/v1/arrays/", a.ID), "")
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || a.States[job.Cancelled] != 3 {
		t.Errorf("after cancelling all: %d %s", rec.Code, rec.Body)
	}
}

// The form reads the run settings and marks each one at fault.
func TestSubmitFormRunSettings(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	v := url.Values{"name": {"f"}, "team": {"vision"}, "gpus": {"1"}, "kind": {"command"}, "command": {"python3 x.py"},
		"env": {"LR=1\nGPUPORTAL_X=2"}, "time_limit": {"later"}, "dependencies": {"afterok:x"}, "array": {"0-3%2"}}
	rec := ts.do(t, "alice", http.MethodPost, "/jobs", v.Encode())
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{"GPUPORTAL_X is set by gpuportal", `name="time_limit" value="later"`, "is not a job ID"} {
		if !strings.Contains(body, want) {
			t.Errorf("form lacks %q", want)
		}
	}
	v.Set("env", "LR=1\nDATA=/d")
	v.Set("time_limit", "30m")
	v.Set("dependencies", "")
	rec = ts.do(t, "alice", http.MethodPost, "/jobs", v.Encode())
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	js, err := ts.store.ListJobs(context.Background(), models.JobFilter{User: "alice"})
	if err != nil || len(js) != 4 || js[0].ArrayLimit != 2 || js[0].TimeLimitS != 1800 || len(js[0].Env) != 2 {
		t.Errorf("stored %d jobs: %+v, %v", len(js), js, err)
	}
}

// TestSubmitFormRefusesAnUnknownKind: a submit form whose "What runs"
// is none of command, sim and session is refused, naming the field; it
// was submitted as a simulated job.
func TestSubmitFormRefusesAnUnknownKind(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	v := url.Values{"name": {"f"}, "team": {"vision"}, "gpus": {"1"}, "kind": {"bogus"}, "duration_s": {"30"}}
	rec := ts.do(t, "alice", http.MethodPost, "/jobs", v.Encode())
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "want command, sim or session") {
		t.Fatalf("status %d; want 400 naming kind: %.500s", rec.Code, rec.Body)
	}
	if js, err := ts.store.ListJobs(context.Background(), models.JobFilter{User: "alice"}); err != nil || len(js) != 0 {
		t.Errorf("stored %d jobs (%v), want none", len(js), err)
	}
	v.Set("kind", "sim")
	if rec := ts.do(t, "alice", http.MethodPost, "/jobs", v.Encode()); rec.Code != http.StatusSeeOther {
		t.Errorf("a simulated job: status %d: %.300s", rec.Code, rec.Body)
	}
}

func TestSetTeamTimeLimits(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	rec := ts.do(t, "lead", http.MethodPut, "/api/v1/teams/vision/time-limits", `{"default_time_limit":"4h","max_time_limit":"1-00:00:00"}`)
	var team api.Team
	if err := json.Unmarshal(rec.Body.Bytes(), &team); rec.Code != http.StatusOK || err != nil ||
		team.DefaultTimeLimitS != 4*3600 || team.MaxTimeLimitS != 24*3600 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	for body, field := range map[string]string{
		`{"default_time_limit":"2d","max_time_limit":"1h"}`: "default_time_limit",
		`{"default_time_limit":"5h","max_time_limit":"1h"}`: "default_time_limit",
		`{"default_time_limit":"","max_time_limit":"-1h"}`:  "max_time_limit",
	} {
		rec := ts.do(t, "admin", http.MethodPut, "/api/v1/teams/vision/time-limits", body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), field+":") {
			t.Errorf("%s: %d %s; want 400 naming %s", body, rec.Code, rec.Body, field)
		}
	}
	if page := ts.do(t, "alice", http.MethodGet, "/teams/vision", "").Body.String(); !strings.Contains(page, "04:00:00") || strings.Contains(page, "team-time-limits") {
		t.Errorf("team page as a member: the limits are shown, the form is not")
	}
}

// TestTeamIdlePolicyForm: the team's lead sets its idle policy from the
// team page (CSRF, as every form), sees the values it saved, gets a 400
// naming the field for a bad keep-alive, and a member sees the policy
// but not the form.
func TestTeamIdlePolicyForm(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	rec := ts.do(t, "lead", http.MethodPost, "/teams/vision/idle-policy", "reclaim_batch=on&max_keep_alive_hours=2.5")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Idle GPU policy saved.") {
		t.Fatalf("save: %d %.300s", rec.Code, rec.Body)
	}
	tm, err := ts.store.Team(context.Background(), "vision")
	if err != nil || !tm.IdleSpareSessions || !tm.IdleReclaimBatch || tm.MaxKeepAliveS != 9000 {
		t.Fatalf("stored %+v, %v; want sessions spared, batch reclaimed, 2.5 h", tm, err)
	}
	page := rec.Body.String()
	for _, want := range []string{`data-field="reclaim_sessions">spared<`, `data-field="reclaim_batch">preempted<`,
		`data-field="max_keep_alive_hours">2.5<`, `name="max_keep_alive_hours" type="number" min="0" max="720" step="any" value="2.5"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page after saving lacks %s", want)
		}
	}
	for body, field := range map[string]string{"max_keep_alive_hours=lots": "max_keep_alive_hours", "max_keep_alive_hours=-1": "max_keep_alive_hours",
		"max_keep_alive_hours=721": "max_keep_alive_hours"} {
		rec := ts.do(t, "lead", http.MethodPost, "/teams/vision/idle-policy", body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), field+":") {
			t.Errorf("%s: %d; want 400 naming %s", body, rec.Code, field)
		}
	}
	if tm, _ := ts.store.Team(context.Background(), "vision"); tm.MaxKeepAliveS != 9000 {
		t.Errorf("a refused form changed the policy: %+v", tm)
	}
	member := ts.do(t, "alice", http.MethodGet, "/teams/vision", "").Body.String()
	if !strings.Contains(member, `id="team-idle-now"`) || strings.Contains(member, `id="team-idle-policy"`) {
		t.Errorf("team page as a member: want the policy shown, not the form")
	}
	if !strings.Contains(member, `data-field="idle_rule">under 5% for 30m (the server&#39;s)<`) {
		t.Errorf("team page as a member: the server's idle rule in force is not shown")
	}
}

// TestTeamIdleRuleForm: the team's own idle threshold and time, from the
// form (the lead's; an admin's for any team) and the API, shown on the
// page with the server's as placeholders; bad values refused naming the
// field; empty fields or null go back to the server's.
func TestTeamIdleRuleForm(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	form := ts.do(t, "lead", http.MethodGet, "/teams/vision", "").Body.String()
	for _, want := range []string{`name="idle_below_pct" type="number" min="0.01" max="100" step="any" value="" placeholder="5"`,
		`name="idle_after" value="" placeholder="30m"`} {
		if !strings.Contains(form, want) {
			t.Errorf("the lead's form lacks %s", want)
		}
	}
	rec := ts.do(t, "lead", http.MethodPost, "/teams/vision/idle-policy", "reclaim_sessions=on&idle_below_pct=12.5&idle_after=45m")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Idle GPU policy saved.") {
		t.Fatalf("save: %d %.300s", rec.Code, rec.Body)
	}
	if tm, err := ts.store.Team(ctx, "vision"); err != nil || tm.IdleBelowPct != 12.5 || tm.IdleAfterS != 45*60 {
		t.Fatalf("stored %+v, %v; want 12.5%% for 45m", tm, err)
	}
	page := rec.Body.String()
	for _, want := range []string{`value="12.5" placeholder="5"`, `value="45m" placeholder="30m"`,
		`data-field="idle_rule">under 12.5% for 45m<`, "idle when all its GPUs are under 12.5% utilization for 45m"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page after saving lacks %s", want)
		}
	}
	for body, field := range map[string]string{
		"idle_below_pct=lots": "idle_below_pct", "idle_below_pct=0": "idle_below_pct", "idle_below_pct=101": "idle_below_pct",
		"idle_after=soon": "idle_after", "idle_after=500ms": "idle_after", "idle_after=25h": "idle_after", "idle_after=-1m": "idle_after",
	} {
		rec := ts.do(t, "lead", http.MethodPost, "/teams/vision/idle-policy", "reclaim_sessions=on&"+body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), field+":") {
			t.Errorf("form %s: %d; want 400 naming %s", body, rec.Code, field)
		}
	}
	for body, field := range map[string]string{
		`{"idle_below_pct":0}`: "idle_below_pct", `{"idle_below_pct":-3}`: "idle_below_pct", `{"idle_below_pct":100.1}`: "idle_below_pct",
		`{"idle_after_s":0.5}`: "idle_after_s", `{"idle_after_s":-60}`: "idle_after_s", `{"idle_after_s":86401}`: "idle_after_s",
		`{"idle_after_s":1e300}`: "idle_after_s",
	} {
		rec := ts.do(t, "lead", http.MethodPut, "/api/v1/teams/vision/idle-policy", body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), field+":") {
			t.Errorf("API %s: %d %s; want 400 naming %s", body, rec.Code, rec.Body, field)
		}
	}
	if tm, _ := ts.store.Team(ctx, "vision"); tm.IdleBelowPct != 12.5 || tm.IdleAfterS != 45*60 {
		t.Errorf("a refused value changed the rule: %+v", tm)
	}
	// An admin sets another team's rule through the API; null and 0 go
	// back to the server's.
	rec = ts.do(t, "admin", http.MethodPut, "/api/v1/teams/nlp/idle-policy", `{"reclaim_sessions":true,"idle_below_pct":50,"idle_after_s":90}`)
	var team api.Team
	if err := json.Unmarshal(rec.Body.Bytes(), &team); rec.Code != http.StatusOK || err != nil || team.IdlePolicy.IdleBelowPct == nil ||
		*team.IdlePolicy.IdleBelowPct != 50 || team.IdlePolicy.IdleAfterS == nil || *team.IdlePolicy.IdleAfterS != 90 {
		t.Fatalf("admin sets nlp's rule: %d %s", rec.Code, rec.Body)
	}
	if page := ts.do(t, "admin", http.MethodGet, "/teams/nlp", "").Body.String(); !strings.Contains(page, `value="1m30s" placeholder="30m"`) {
		t.Errorf("nlp's page as admin does not show its own idle time 1m30s")
	}
	rec = ts.do(t, "admin", http.MethodPut, "/api/v1/teams/nlp/idle-policy", `{"reclaim_sessions":true,"idle_below_pct":null,"idle_after_s":0}`)
	team = api.Team{}
	if err := json.Unmarshal(rec.Body.Bytes(), &team); rec.Code != http.StatusOK || err != nil || team.IdlePolicy.IdleBelowPct != nil || team.IdlePolicy.IdleAfterS != nil {
		t.Errorf("nlp back to the server's rule: %d %s", rec.Code, rec.Body)
	}
	if !strings.Contains(rec.Body.String(), `"idle_below_pct":null`) {
		t.Errorf("the API leaves out a null idle_below_pct: %s", rec.Body)
	}
	rec = ts.do(t, "lead", http.MethodPost, "/teams/vision/idle-policy", "reclaim_sessions=on&idle_below_pct=&idle_after=")
	if tm, _ := ts.store.Team(ctx, "vision"); rec.Code != http.StatusOK || tm.IdleBelowPct != 0 || tm.IdleAfterS != 0 {
		t.Errorf("empty fields: %d, stored %+v; want the server's", rec.Code, tm)
	}
	// Neither a member nor another team's lead sets it.
	if rec := ts.do(t, "alice", http.MethodPut, "/api/v1/teams/vision/idle-policy", `{"idle_below_pct":90}`); rec.Code != http.StatusForbidden {
		t.Errorf("a member set the idle rule: %d", rec.Code)
	}
	if rec := ts.do(t, "lead", http.MethodPost, "/teams/nlp/idle-policy", "idle_below_pct=90"); rec.Code != http.StatusForbidden {
		t.Errorf("vision's lead set nlp's idle rule: %d", rec.Code)
	}
}

// TestTeamSessionPolicy: the lead sets the team's session policy (API
// and form, 400s naming the field); a session then gets the maximum as
// its time limit, or less if it asks, and is refused more; batch jobs
// are not bound by it; a session's interactive priority is kept.
func TestTeamSessionPolicy(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	rec := ts.do(t, "lead", http.MethodPut, "/api/v1/teams/vision/session-policy", `{"max_session_hours":2,"priority_gpus":1}`)
	var team api.Team
	if err := json.Unmarshal(rec.Body.Bytes(), &team); rec.Code != http.StatusOK || err != nil ||
		team.SessionPolicy.MaxSessionHours != 2 || team.SessionPolicy.PriorityGPUs != 1 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	for body, field := range map[string]string{
		`{"max_session_hours":-1}`:  "max_session_hours",
		`{"max_session_hours":1e9}`: "max_session_hours",
		`{"priority_gpus":-2}`:      "priority_gpus",
	} {
		rec := ts.do(t, "lead", http.MethodPut, "/api/v1/teams/vision/session-policy", body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), field+":") {
			t.Errorf("%s: %d %s; want 400 naming %s", body, rec.Code, rec.Body, field)
		}
	}
	if rec := ts.do(t, "lead", http.MethodPost, "/teams/vision/session-policy", "max_session_hours=a+while"); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "max_session_hours:") {
		t.Errorf("form with a bad max_session_hours: %d; want 400 naming it", rec.Code)
	}
	if rec := ts.do(t, "alice", http.MethodPut, "/api/v1/teams/vision/session-policy", `{"max_session_hours":100}`); rec.Code != http.StatusForbidden {
		t.Errorf("a member set the session policy: %d", rec.Code)
	}
	page := ts.do(t, "lead", http.MethodGet, "/teams/vision", "").Body.String()
	if !strings.Contains(page, `data-field="max_session_hours">2<`) || !strings.Contains(page, `data-field="priority_gpus">1<`) || !strings.Contains(page, `id="team-session-policy"`) {
		t.Errorf("the lead's team page does not show the session policy and its form")
	}
	submit := func(body string) (*httptest.ResponseRecorder, api.Job) {
		rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", body)
		var j api.Job
		_ = json.Unmarshal(rec.Body.Bytes(), &j)
		return rec, j
	}
	if rec, j := submit(`{"name":"nb","gpus":1,"session":{"type":"terminal","priority":true}}`); rec.Code != http.StatusCreated ||
		j.TimeLimitS == nil || *j.TimeLimitS != 7200 || j.Session == nil || !j.Session.Priority {
		t.Errorf("a session without a limit: %d %s; want the team's 2h and its priority kept", rec.Code, rec.Body)
	}
	if rec, j := submit(`{"name":"nb","gpus":1,"time_limit":"30","session":{"type":"terminal"}}`); rec.Code != http.StatusCreated || j.TimeLimitS == nil || *j.TimeLimitS != 1800 {
		t.Errorf("a session asking for 30 minutes: %d %s", rec.Code, rec.Body)
	}
	if rec, _ := submit(`{"name":"nb","gpus":1,"time_limit":"3:00:00","session":{"type":"terminal"}}`); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "time_limit:") {
		t.Errorf("a session asking for 3h of 2h: %d %s; want 400 naming time_limit", rec.Code, rec.Body)
	}
	if rec, j := submit(`{"name":"batch","gpus":1,"sim":{"duration_s":60}}`); rec.Code != http.StatusCreated || j.TimeLimitS != nil {
		t.Errorf("a batch job: %d %s; want no time limit from the session maximum", rec.Code, rec.Body)
	}
}

// TestTeamSessionLimits: the lead turns sessions off for the team and
// caps the GPUs its sessions ask for at once (API and the team page's
// form); a session past either is a 400 naming the field, the page and
// the API say the policy, and bad values name theirs.
func TestTeamSessionLimits(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	rec := ts.do(t, "lead", http.MethodPut, "/api/v1/teams/vision/session-policy", `{"allowed":false}`)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"allowed":false`) {
		t.Fatalf("turning sessions off: %d %s", rec.Code, rec.Body)
	}
	session := func(gpus int) *httptest.ResponseRecorder {
		return ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", fmt.Sprintf(`{"name":"nb","gpus":%d,"session":{"type":"jupyter"}}`, gpus))
	}
	if rec := session(1); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "session: team vision does not allow interactive sessions") {
		t.Errorf("a session where they are off: %d %s; want 400 naming session", rec.Code, rec.Body)
	}
	page := ts.do(t, "alice", http.MethodGet, "/teams/vision", "").Body.String()
	if !strings.Contains(page, `data-field="sessions_allowed">not allowed<`) {
		t.Errorf("a member's team page does not say sessions are off")
	}
	terms := func() string {
		t.Helper()
		page := ts.do(t, "alice", http.MethodGet, "/jobs/new", "").Body.String()
		_, after, _ := strings.Cut(page, `id="session-terms">`)
		text, _, _ := strings.Cut(after, "</p>")
		return text
	}
	if got := terms(); !strings.Contains(got, "Team vision does not allow interactive sessions (its session policy).") {
		t.Errorf("the submit form's session terms %q, want sessions off said", got)
	}

	// The form: allowed again, 1 GPU at once.
	if rec := ts.do(t, "lead", http.MethodPost, "/teams/vision/session-policy", "sessions=allowed&max_gpus=1&max_session_hours=0"); rec.Code != http.StatusOK {
		t.Fatalf("the form: %d", rec.Code)
	}
	rec = ts.do(t, "alice", http.MethodGet, "/api/v1/teams/vision", "")
	var team api.Team
	if err := json.Unmarshal(rec.Body.Bytes(), &team); err != nil || !team.SessionPolicy.SessionsAllowed() || team.SessionPolicy.Allowed == nil || team.SessionPolicy.MaxGPUs != 1 {
		t.Fatalf("the team after the form: %d %s", rec.Code, rec.Body)
	}
	page = ts.do(t, "lead", http.MethodGet, "/teams/vision", "").Body.String()
	if !strings.Contains(page, `data-field="max_session_gpus">1<`) || !strings.Contains(page, `<option value="allowed" selected>`) {
		t.Errorf("the lead's team page does not show the cap and the form's choice")
	}
	if got := terms(); !strings.Contains(got, "Team vision: its sessions may ask for 1 GPUs at once, 0 asked for now.") {
		t.Errorf("the submit form's session terms %q, want the cap and none asked for", got)
	}
	if rec := session(1); rec.Code != http.StatusCreated {
		t.Errorf("a session within the cap: %d %s", rec.Code, rec.Body)
	}
	if got := terms(); !strings.Contains(got, "1 asked for now") {
		t.Errorf("the submit form's session terms %q, want the session counted", got)
	}
	if rec := session(1); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "gpus: team vision's sessions may ask for 1 GPUs at once; 1 are asked for already") {
		t.Errorf("a session past the cap: %d %s; want 400 naming gpus", rec.Code, rec.Body)
	}
	if rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", `{"name":"batch","gpus":2,"sim":{"duration_s":60}}`); rec.Code != http.StatusCreated {
		t.Errorf("a batch job past the sessions' cap: %d %s", rec.Code, rec.Body)
	}
	for form, field := range map[string]string{
		"sessions=maybe":             "sessions",
		"max_gpus=two":               "max_gpus",
		"max_gpus=-1":                "max_gpus",
		"max_gpus=1&priority_gpus=2": "priority_gpus",
	} {
		if rec := ts.do(t, "lead", http.MethodPost, "/teams/vision/session-policy", form); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), field+":") {
			t.Errorf("form %q: %d; want 400 naming %s", form, rec.Code, field)
		}
	}
	if rec := ts.do(t, "lead", http.MethodPut, "/api/v1/teams/vision/session-policy", `{"max_gpus":5000}`); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "max_gpus:") {
		t.Errorf("max_gpus 5000: %d %s; want 400 naming it", rec.Code, rec.Body)
	}
	if rec := ts.do(t, "alice", http.MethodPost, "/teams/vision/session-policy", "sessions=off"); rec.Code != http.StatusForbidden {
		t.Errorf("a member's form: %d; want 403", rec.Code)
	}
}

// TestDependencyOnArrayNamesTheArray: a job after an array (its ID, its
// first task's) says it waits for the array, and once a task of it ended
// otherwise, that the array did; its reason named job ID, whose own
// state may differ ("job 25 ended failed" of a job that had succeeded).
func TestDependencyOnArrayNamesTheArray(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", `{"name":"sweep","gpus":64,"sim":{"duration_s":60},"array":"0-1"}`)
	var first api.Job
	if err := json.Unmarshal(rec.Body.Bytes(), &first); err != nil || rec.Code != http.StatusCreated {
		t.Fatalf("array: %d %s", rec.Code, rec.Body)
	}
	rec = ts.do(t, "alice", http.MethodPost, "/api/v1/jobs",
		fmt.Sprintf(`{"name":"after","gpus":1,"sim":{"duration_s":1},"dependencies":[{"kind":"after_ok","job_id":%d}]}`, first.ID))
	var after api.Job
	if err := json.Unmarshal(rec.Body.Bytes(), &after); err != nil || rec.Code != http.StatusCreated {
		t.Fatalf("after: %d %s", rec.Code, rec.Body)
	}
	reasonBecomes := func(want string) {
		t.Helper()
		var got api.Job
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_ = json.Unmarshal(ts.do(t, "alice", http.MethodGet, fmt.Sprint("/api/v1/jobs/", after.ID), "").Body.Bytes(), &got)
			if got.Reason == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("reason %q; want %q", got.Reason, want)
			}
		}
	}
	reasonBecomes(fmt.Sprintf("waiting for array %d to succeed", first.ID))
	if rec := ts.do(t, "alice", http.MethodDelete, fmt.Sprint("/api/v1/arrays/", first.ID), ""); rec.Code != http.StatusOK {
		t.Fatalf("cancel the array: %d %s", rec.Code, rec.Body)
	}
	reasonBecomes(fmt.Sprintf("dependency never satisfied: a task of array %d ended cancelled, and this job runs only after every task of it succeeds", first.ID))
	// Its page names the array too, with the array's page: "job 1" with
	// the array's state was a job whose own state it was not.
	page := ts.do(t, "alice", http.MethodGet, fmt.Sprint("/jobs/", after.ID), "").Body.String()
	if want := fmt.Sprintf(`<a href="/arrays/%d">array %d</a>`, first.ID, first.ID); !strings.Contains(page, want) {
		t.Errorf("job page lacks %s", want)
	}
}
