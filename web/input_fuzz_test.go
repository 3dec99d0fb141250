package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzSubmitAPI sends arbitrary bodies to POST /api/v1/jobs through the
// whole server (decoding, validation, the store): every answer is a 2xx
// or a 4xx, never a 5xx or a panic, within the request's deadline and
// maxRequestAlloc (boundedDo); a 400 names the field at fault or the
// body.
func FuzzSubmitAPI(f *testing.F) {
	for _, s := range []string{
		`{"name":"resnet","gpus":2,"sim":{"duration_s":60}}`,
		`{"name":"cmd","gpus":1,"command":"python train.py","env":{"LR":"0.1"},"time_limit":"2h","array":"0-3%2","array_params":"LR\n1\n2\n3\n4\n"}`,
		`{"name":"s","gpus":1,"session":{"type":"web","port":8888},"command":"python -m http.server"}`,
		`{"name":"share","gpu_fraction":0.25,"model":"vgg16","batch_size":50,"sim":{"duration_s":60}}`,
		`{"name":"d","gpus":1,"command":"x","dependencies":[{"kind":"afterok","job_id":9223372036854775807}]}`,
		`{"name":"a","gpus":1,"command":"x","array":"0-9:999999%1000"}`,
		`{"name":"a","gpus":1,"command":"x","array":"1-0"}`,
		`{"name":"x","gpus":1,"command":"x","retries":9223372036854775807,"batch_size":-9223372036854775808}`,
		"{\"name\":\"x\",\"gpus\":1,\"command\":\"x\",\"workdir\":\"\\u0000\"}",
	} {
		f.Add([]byte(s))
	}
	for _, s := range unboundedSubmits {
		f.Add([]byte(s.body))
	}
	ts := newTestServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := boundedDo(t, ts, "alice", http.MethodPost, "/api/v1/jobs", string(body))
		switch {
		case rec.Code >= 500 || rec.Code < 200:
			t.Fatalf("%.300q: status %d: %.300s", body, rec.Code, rec.Body)
		case rec.Code == http.StatusBadRequest:
			msg := apiErrorOf(t, rec)
			checkClear(t, string(body), msg)
			// Go's decoder matches keys without regard to case: the
			// message names the field as the body spelled it.
			field, rest, _ := strings.Cut(msg, ":")
			if !namesField(strings.ToLower(field)+":"+rest) && !namesField(msg) && !strings.HasPrefix(msg, "body") && !strings.HasPrefix(msg, "unknown field ") {
				t.Fatalf("%.300q: rejected with %q, which names neither the body nor a field", body, msg)
			}
		}
	})
}

// formRoute is a form of the portal, fuzzed in three of its fields, the
// others set to values it takes.
type formRoute struct {
	path   string
	role   string
	fields [3]string
	fixed  url.Values
}

// fuzzFormRoutes are the forms that post, for FuzzForms; running is a
// running job's ID.
func fuzzFormRoutes(running int64) []formRoute {
	sim := url.Values{"name": {"x"}, "gpus": {"1"}, "kind": {"sim"}, "duration_s": {"5"}}
	cmd := url.Values{"name": {"x"}, "gpus": {"1"}, "kind": {"command"}, "command": {"python train.py"}}
	return []formRoute{
		{"/jobs", "alice", [3]string{"gpus", "array", "array_params"}, cmd},
		{"/jobs", "alice", [3]string{"env", "dependencies", "time_limit"}, cmd},
		{"/jobs", "alice", [3]string{"duration_s", "gpu_mem_gb", "gpu_fraction"}, sim},
		{"/jobs", "alice", [3]string{"cpu_family", "cpu_curve", "mem_curve"}, sim},
		{"/jobs", "alice", [3]string{"name", "retries", "workdir"}, cmd},
		{"/jobs", "alice", [3]string{"session_type", "session_port", "command"}, url.Values{"name": {"s"}, "gpus": {"1"}, "kind": {"session"}}},
		{"/jobs", "alice", [3]string{"mem_persistent_mib", "mem_ephemeral_mib", "batch_size"}, url.Values{"name": {"x"}, "gpus": {"1"}, "kind": {"sim"}, "duration_s": {"5"}, "sharing": {"on"}}},
		{"/teams/vision/caps", "lead", [3]string{"user", "max_gpus"}, nil},
		{"/teams/vision/time-limits", "lead", [3]string{"default_time_limit", "max_time_limit"}, nil},
		{"/teams/vision/idle-policy", "lead", [3]string{"max_keep_alive_hours", "idle_below_pct", "idle_after"}, nil},
		{"/teams/vision/session-policy", "lead", [3]string{"max_session_hours", "priority_gpus"}, nil},
		{"/teams/vision/share", "admin", [3]string{"guaranteed_gpus", "weight", "max_gpus_per_user"}, nil},
		{"/notifications", "alice", [3]string{"email", "held_after_hours", "events"}, nil},
		{"/tokens", "alice", [3]string{"name", "days"}, nil},
		{"/admin/create-team", "admin", [3]string{"name", "guarantee"}, nil},
		{"/admin/whatif", "admin", [3]string{"days", "thresholds", "min_runtime_s"}, url.Values{"policy": {"fifo"}}},
		{fmt.Sprintf("/jobs/%d/keep-alive", running), "alice", [3]string{"hours"}, nil},
		{fmt.Sprintf("/jobs/%d/template", running), "alice", [3]string{"template_name"}, nil},
	}
}

// FuzzForms posts arbitrary values to the portal's forms (the submit
// form, the team's caps, time limits, idle and session policies and
// share, notifications, tokens, admin actions, what-if, keep-alive,
// templates): every answer is a 2xx, 3xx or 4xx, never a 5xx or a panic,
// within the request's deadline and maxRequestAlloc (boundedDo).
func FuzzForms(f *testing.F) {
	huge := "9223372036854775807"
	for i := range uint8(len(fuzzFormRoutes(1))) {
		f.Add(i, "1", "2", "3")
		f.Add(i, huge, "-"+huge, "1e-300")
		f.Add(i, "\xff", "a\x00b", strings.Repeat("9", 400))
	}
	f.Add(uint8(0), "1", huge, "")
	f.Add(uint8(0), "1", "0-"+huge+"%"+huge, "")
	f.Add(uint8(1), "LR=1\nLR=2", "afterok:1:2:3", "1-25:99")
	f.Add(uint8(2), "NaN", "Inf", "-0")
	ts := newTestServer(f)
	running := ts.startedJob(f, "busy", 1, []string{"node-0:0"}, time.Now())
	routes := fuzzFormRoutes(running)
	f.Fuzz(func(t *testing.T, route uint8, a, b, c string) {
		r := routes[int(route)%len(routes)]
		form := url.Values{}
		for k, v := range r.fixed {
			form[k] = v
		}
		for i, v := range []string{a, b, c} {
			if r.fields[i] != "" {
				form.Set(r.fields[i], v)
			}
		}
		rec := boundedDo(t, ts, r.role, http.MethodPost, r.path, form.Encode())
		if rec.Code >= 500 || rec.Code < 200 {
			t.Fatalf("POST %s %q: status %d: %.300s", r.path, form.Encode(), rec.Code, rec.Body)
		}
	})
}
