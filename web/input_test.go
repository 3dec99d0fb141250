package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// Bounded input (issue 29, finding 3 and the input items of 7): every
// field of the submit API and of the forms is read within explicit
// bounds, and what is out of them is a 400 naming the field, at once.

const (
	// requestDeadline is the deadline of one request's context in these
	// tests; a request must have returned a little after it.
	requestDeadline = 10 * time.Second
	// maxRequestAlloc bounds what one request may allocate.
	maxRequestAlloc = 50 << 20
)

// boundedDo sends a request as role, as ts.do does, with a context
// deadline, and fails t unless it returns by then (with a grace for a
// loaded machine) having allocated less than maxRequestAlloc.
func boundedDo(t testing.TB, ts *testServer, role, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestDeadline)
	defer cancel()
	var r *strings.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequestWithContext(ctx, method, target, nil)
	if r != nil {
		req = httptest.NewRequestWithContext(ctx, method, target, r)
	}
	if strings.HasPrefix(target, "/api/") {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+ts.tokens[role])
	} else {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: ts.sessions[role]})
		req.Header.Set(csrfHeader, sessionCSRF(ts.sessions[role]))
	}
	rec := httptest.NewRecorder()
	done := make(chan uint64, 1)
	go func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ts.Handler().ServeHTTP(rec, req)
		runtime.ReadMemStats(&after)
		done <- after.TotalAlloc - before.TotalAlloc
	}()
	select {
	case alloc := <-done:
		if alloc > maxRequestAlloc {
			t.Fatalf("%s %s %.200q: allocated %d MB, want under %d", method, target, body, alloc>>20, maxRequestAlloc>>20)
		}
	case <-time.After(requestDeadline + 20*time.Second):
		t.Fatalf("%s %s %.200q: no answer %v after its deadline", method, target, body, 20*time.Second)
	}
	return rec
}

// apiErrorOf is the message of an API error answer.
func apiErrorOf(t testing.TB, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e struct{ Error string }
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
		t.Fatalf("the answer (%d) is not an API error: %v: %.300s", rec.Code, err, rec.Body)
	}
	return e.Error
}

// submitBase is a valid submission, for the cases that spoil one field.
const submitBase = `"name":"x","gpus":1,"command":["python","train.py"]`

// unboundedSubmits are submissions the API must refuse with a 400 naming
// field: each was accepted, altered or never answered before, but for
// the unknown field and the bounds the API already kept (dependencies,
// 1e-300 or 1.5 GPUs), kept here so that they stay.
var unboundedSubmits = []struct {
	name, body, field string
}{
	// The loop over the array's range wrapped around at the largest int:
	// the request never answered and the server's memory grew.
	{"array at the largest int", `{` + submitBase + `,"array":"9223372036854775807"}`, "array"},
	{"array up to the largest int", `{` + submitBase + `,"array":"0-9223372036854775807"}`, "array"},
	{"array step at the largest int", `{` + submitBase + `,"array":"0-9:9223372036854775807"}`, "array"},
	{"array limit at the largest int", `{` + submitBase + `,"array":"0-3%9223372036854775807"}`, "array"},
	{"array index above the largest", `{` + submitBase + `,"array":"1000000"}`, "array"},
	{"array of too many tasks", `{` + submitBase + `,"array":"0-1000"}`, "array"},
	{"array limit above the tasks", `{` + submitBase + `,"array":"0-3%1001"}`, "array"},
	{"array text too long", `{` + submitBase + `,"array":"` + strings.Repeat("1,", job.MaxArraySpecLen) + `1"}`, "array"},
	{"parameters of too many columns", `{` + submitBase + `,"array_params":"` + manyColumns(job.MaxEnv+1) + `"}`, "array_params"},
	{"dependencies beyond the bound", `{` + submitBase + `,"dependencies":[` + strings.Repeat(`{"kind":"afterok","job_id":1},`, job.MaxDependencies) + `{"kind":"afterok","job_id":1}]}`, "dependencies"},
	// Trailing data was ignored: the first object was submitted.
	{"a second object after the job", `{` + submitBase + `} {"x":1}`, "body"},
	{"garbage after the job", `{` + submitBase + `}garbage`, "body"},
	{"a second job after the job", `{` + submitBase + `}{` + submitBase + `}`, "body"},
	// Invalid UTF-8 became U+FFFD: another name, another command.
	{"name not UTF-8", `{"name":"x` + "\xff" + `","gpus":1,"command":["x"]}`, "name"},
	{"command not UTF-8", `{"name":"x","gpus":1,"command":["x` + "\xfe" + `"]}`, "command"},
	{"name with a lone surrogate", `{"name":"x\ud800","gpus":1,"command":["x"]}`, "name"},
	{"name with a low surrogate alone", `{"name":"x\udc00y","gpus":1,"command":["x"]}`, "name"},
	{"variable not UTF-8", `{` + submitBase + `,"env":{"LR":"0.1` + "\xff" + `"}}`, "env.LR"},
	{"variable name not UTF-8", `{` + submitBase + `,"env":{"L` + "\xff" + `R":"0.1"}}`, "env"},
	{"variable with a NUL byte", `{` + submitBase + `,"env":{"LR":"a\u0000b"}}`, "env.LR"},
	{"key not UTF-8", `{` + submitBase + `,"n` + "\xff" + `me":"y"}`, "unknown field"},
	// Numbers that round to nothing.
	{"1e-300 GPUs", `{"name":"x","gpus":1e-300,"command":["x"]}`, "gpus"},
	{"a fraction of GPUs", `{"name":"x","gpus":1.5,"command":["x"]}`, "gpus"},
	{"1e-300 of a GPU", `{"name":"x","gpu_fraction":1e-300,"command":["x"]}`, "gpu_fraction"},
	{"1e-300 GB of GPU memory", `{` + submitBase + `,"gpu_mem_gb":1e-300}`, "gpu_mem_gb"},
	{"GPU memory that reads as 0", `{` + submitBase + `,"gpu_mem_gb":1e-400}`, "gpu_mem_gb"},
	{"a simulated job of 1e-300 s", `{"name":"x","gpus":1,"sim":{"duration_s":1e-300}}`, "sim.duration_s"},
	{"a time limit of 1 ns", `{` + submitBase + `,"time_limit":"1ns"}`, "time_limit"},
	{"more GPUs than an int", `{"name":"x","gpus":99999999999999999999,"command":["x"]}`, "gpus"},
}

// manyColumns is a parameter table of n columns and one row.
func manyColumns(n int) string {
	names, values := make([]string, n), make([]string, n)
	for i := range n {
		names[i], values[i] = fmt.Sprintf("V%d", i), "1"
	}
	return strings.Join(names, ",") + `\n` + strings.Join(values, ",") + `\n`
}

// TestSubmitRefusesUnboundedInput: each submission of unboundedSubmits is
// a 400 naming its field, answered within the deadline and the memory
// bound; no job is stored. Before, the array at the largest int never
// answered, and the others were accepted (201), altered.
func TestSubmitRefusesUnboundedInput(t *testing.T) {
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ts := newTestServerOn(t, dsn)
		for _, tc := range unboundedSubmits {
			t.Run(tc.name, func(t *testing.T) {
				rec := boundedDo(t, ts, "alice", http.MethodPost, "/api/v1/jobs", tc.body)
				if rec.Code != http.StatusBadRequest {
					t.Fatalf("status %d, want 400: %.300s", rec.Code, rec.Body)
				}
				if msg := apiErrorOf(t, rec); !strings.HasPrefix(msg, tc.field+":") && !strings.HasPrefix(msg, tc.field+" ") {
					t.Fatalf("error %q does not name %s", msg, tc.field)
				}
			})
		}
		jobs, err := ts.store.ListJobs(context.Background(), models.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 0 {
			t.Errorf("%d jobs stored from refused submissions", len(jobs))
		}
	})
}

// TestSubmitAcceptsWithinBounds: what the bounds leave in is accepted as
// given: white space after the body, a character outside the BMP as an
// escaped pair, the largest index and limit of an array.
func TestSubmitAcceptsWithinBounds(t *testing.T) {
	ts := newTestServer(t)
	for _, body := range []string{
		`{` + submitBase + "}\n\t ",
		`{"name":"x \ud83d\ude00","gpus":1,"command":["x"]}`,
		`{` + submitBase + `,"array":"0,999%1000"}`, // 1000 tasks: core/job's tests
		`{` + submitBase + `,"array":"999999"}`,
		`{` + submitBase + `,"gpu_mem_gb":0.001,"time_limit":"0.5m"}`,
		`{"name":"x","gpu_fraction":0.01,"command":["x"],"gpu_mem_gb":1}`,
	} {
		if rec := boundedDo(t, ts, "alice", http.MethodPost, "/api/v1/jobs", body); rec.Code != http.StatusCreated {
			t.Errorf("%.200s: status %d, want 201: %.300s", body, rec.Code, rec.Body)
		}
	}
	rec := boundedDo(t, ts, "alice", http.MethodPost, "/api/v1/jobs", `{"name":"x \ud83d\ude00","gpus":1,"command":["x"]}`)
	var j struct{ Name string }
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil || j.Name != "x 😀" {
		t.Errorf("name stored as %q, %v; want %q", j.Name, err, "x 😀")
	}
}

// TestJSONEndpointsAreStrict: every JSON endpoint reads its body as the
// submit API does (decodeJSON): trailing data, text that is not UTF-8
// and numbers that round to nothing are 400s naming the field. The join
// token and keep-alive endpoints read with echo's Bind, which took the
// first object and ignored the rest; keep-alive hours of 1e300 made a
// negative duration and was accepted.
func TestJSONEndpointsAreStrict(t *testing.T) {
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ts := newTestServerOn(t, dsn)
		running := ts.startedJob(t, "busy", 1, []string{"node-0:0"}, time.Now())
		keepAlive := fmt.Sprintf("/api/v1/jobs/%d/keep-alive", running)
		tests := []struct {
			role, method, target, body, field string
		}{
			{"alice", http.MethodPut, "/api/v1/me/notifications", `{"events":[]} {"events":["failed"]}`, "body"},
			{"alice", http.MethodPut, "/api/v1/me/notifications", `{"webhook_secret":"s` + "\xff" + `"}`, "webhook_secret"},
			{"admin", http.MethodPost, "/api/v1/join-tokens", `{"name":"rack"}garbage`, "body"},
			{"admin", http.MethodPost, "/api/v1/join-tokens", `{"name":"rack","extra":1}`, "unknown field"},
			{"admin", http.MethodPost, "/api/v1/join-tokens", `{"name":"r` + "\xff" + `"}`, "name"},
			{"alice", http.MethodPost, "/api/v1/templates", `{"name":"t\ud800","job":{` + submitBase + `}}`, "name"},
			{"alice", http.MethodPost, "/api/v1/templates", `{"name":"t","job":{` + submitBase + `,"array":"9223372036854775807"}}`, "job.array"},
			{"alice", http.MethodPost, keepAlive, `{"hours":1e300}`, "hours"},
			{"alice", http.MethodPost, keepAlive, `{"hours":1e-300}`, "hours"},
			{"alice", http.MethodPost, keepAlive, `{"hours":1} {"hours":2}`, "body"},
			{"lead", http.MethodPut, "/api/v1/teams/vision/session-policy", `{"max_session_hours":1e-300}`, "max_session_hours"},
			{"lead", http.MethodPut, "/api/v1/teams/vision/idle-policy", `{"max_keep_alive_hours":1e-300}`, "max_keep_alive_hours"},
			{"lead", http.MethodPut, "/api/v1/teams/vision/time-limits", `{"default_time_limit":"1ns"}`, "default_time_limit"},
			{"admin", http.MethodPatch, "/api/v1/teams/vision", `{"weight":1e-300}`, "weight"},
			{"admin", http.MethodPut, "/api/v1/users/alice/unix-name", `{"unix_name":"a"}x`, "body"},
			{"alice", http.MethodGet, "/api/v1/jobs?q=%ff", "", "q"},
			// A parameter the list does not read (a typo of state) or one
			// given twice was ignored: every job came back, unfiltered.
			{"alice", http.MethodGet, "/api/v1/jobs?stat=failed", "", "stat"},
			{"alice", http.MethodGet, "/api/v1/jobs?limit=1&limit=2", "", "limit"},
			{"alice", http.MethodGet, "/api/v1/teams/vi%00sion", "", "name"},
		}
		for _, tc := range tests {
			t.Run(tc.method+" "+tc.target+" "+tc.field, func(t *testing.T) {
				rec := boundedDo(t, ts, tc.role, tc.method, tc.target, tc.body)
				if rec.Code != http.StatusBadRequest {
					t.Fatalf("%.200q: status %d, want 400: %.300s", tc.body, rec.Code, rec.Body)
				}
				if msg := apiErrorOf(t, rec); !strings.HasPrefix(msg, tc.field) {
					t.Fatalf("%.200q: error %q does not name %s", tc.body, msg, tc.field)
				}
			})
		}
	})
}

// TestFormsRefuseUnboundedInput: the portal's forms refuse, with a 400
// that names the field, text that is not UTF-8 or holds a NUL byte (it
// was stored, or refused by PostgreSQL with a 500) and numbers that
// round to nothing (a session maximum of 1e-300 hours was stored as 0,
// no maximum).
func TestFormsRefuseUnboundedInput(t *testing.T) {
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ts := newTestServerOn(t, dsn)
		running := ts.startedJob(t, "busy", 1, []string{"node-0:0"}, time.Now())
		submit := url.Values{"name": {"x"}, "gpus": {"1"}, "kind": {"command"}, "command": {"python train.py"}}
		with := func(v url.Values, kv ...string) string {
			out := url.Values{}
			for k, vs := range v {
				out[k] = vs
			}
			for i := 0; i+1 < len(kv); i += 2 {
				out.Set(kv[i], kv[i+1])
			}
			return out.Encode()
		}
		tests := []struct {
			role, target, body, field string
		}{
			{"alice", "/jobs", with(submit, "array", "9223372036854775807"), "array"},
			{"alice", "/jobs", with(submit, "array", "0-9223372036854775807%9223372036854775807"), "array"},
			{"alice", "/jobs", with(submit, "env", "LR=0.1\xff"), "env"},
			{"alice", "/jobs", with(submit, "name", "x\x00y"), "name"},
			{"alice", "/jobs", with(submit, "dependencies", "afterok"+strings.Repeat(":1", job.MaxDependencies+1)), "dependencies"},
			{"alice", "/jobs", with(submit, "env", strings.Repeat("A=1\n", job.MaxEnv+1)), "env"},
			{"alice", "/jobs", with(submit, "gpu_fraction", "1e-300"), "gpu_fraction"},
			{"alice", "/jobs", with(submit, "time_limit", "1ns"), "time_limit"},
			{"alice", "/tokens", with(url.Values{"days": {"1"}}, "name", "laptop\xff"), "name"},
			// 213504 days overflowed a Duration to 25 minutes, a token
			// made with a 200.
			{"alice", "/tokens", "name=laptop&days=213504", "days"},
			{"admin", "/admin/machines/join-tokens", "name=rack&ttl_s=18446744074", "ttl_s"},
			{"alice", fmt.Sprintf("/jobs/%d/keep-alive", running), "hours=1e300", "hours"},
			{"alice", fmt.Sprintf("/jobs/%d/template", running), with(url.Values{}, "template_name", "t\x00"), "template_name"},
			{"lead", "/teams/vision/session-policy", "max_session_hours=1e-300", "max_session_hours"},
			{"lead", "/teams/vision/idle-policy", "max_keep_alive_hours=1e-300", "max_keep_alive_hours"},
			{"admin", "/teams/vision/share", "weight=1e-300", "weight"},
			{"admin", "/admin/whatif", "policy=fifo&thresholds=" + increasing(100), "thresholds"},
			{"alice", "/notifications", with(url.Values{}, "webhook_secret", "s\xff"), "webhook_secret"},
		}
		for _, tc := range tests {
			t.Run(tc.target+" "+tc.field, func(t *testing.T) {
				rec := boundedDo(t, ts, tc.role, http.MethodPost, tc.target, tc.body)
				if rec.Code != http.StatusBadRequest {
					t.Fatalf("%.200q: status %d, want 400: %.300s", tc.body, rec.Code, rec.Body)
				}
				// An error page begins its message with a capital.
				if !strings.Contains(strings.ToLower(rec.Body.String()), tc.field) {
					t.Fatalf("%.200q: the page does not name %s: %.500s", tc.body, tc.field, rec.Body)
				}
			})
		}
		if tm, err := ts.store.Team(context.Background(), "vision"); err != nil || tm.MaxSessionS != 0 || tm.Weight < app.MinTeamWeight {
			t.Errorf("a refused form changed the team: %+v, %v", tm, err)
		}
	})
}

// increasing is "1,2,...,n".
func increasing(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i + 1)
	}
	return strings.Join(out, ",")
}

// TestJSONSentAsForm: a JSON body sent with a form's content type, as
// `curl -d '{...}'` sends it (the API's examples), is read as JSON, not
// as an empty form; a real form body on an API route is still checked,
// and its text still refused when it is not UTF-8.
func TestJSONSentAsForm(t *testing.T) {
	ts := newTestServerOn(t, migrated.SQLiteDSN(t))
	send := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/jobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+ts.tokens["alice"])
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, req)
		return rec
	}
	if rec := send(` {"name":"curl","team":"vision","gpus":1,"sim":{"duration_s":60}}`); rec.Code != http.StatusCreated {
		t.Fatalf("JSON sent as a form: status %d: %s", rec.Code, rec.Body)
	}
	if rec := send("name=x%ff"); rec.Code != http.StatusBadRequest || !strings.HasPrefix(apiErrorOf(t, rec), "name") {
		t.Fatalf("a form with text that is not UTF-8: status %d: %s", rec.Code, rec.Body)
	}
}
