package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// TestActionsTakeNoFields: an API action that takes no fields (resubmit,
// a machine's drain or a GPU's clear, an account's disable, a test
// notification) refuses a body that asks for something, with a 400
// naming the field, and does nothing: {"gpus": 4} to resubmit made a
// copy of the job on its old GPU count, with a 201 (found by the audit
// walk-through). An empty body, white space or {} are what they were.
func TestActionsTakeNoFields(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", `{"name":"train","gpus":1,"command":["python3","train.py"]}`)
	var j api.Job
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil || rec.Code != http.StatusCreated {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	resubmit := fmt.Sprintf("/api/v1/jobs/%d/resubmit", j.ID)
	count := func() int {
		t.Helper()
		jobs, err := ts.store.ListJobs(ctx, models.JobFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	for _, tc := range []struct {
		name, role, method, target, body string
		code                             int
		field                            string // named in the error
		newJobs                          int
	}{
		{"resubmit with a field", "alice", http.MethodPost, resubmit, `{"gpus": 4}`, 400, "gpus", 0},
		{"resubmit with two", "alice", http.MethodPost, resubmit, `{"name":"x","command":["a"]}`, 400, "name", 0},
		{"resubmit with no JSON", "alice", http.MethodPost, resubmit, `gpus=4`, 400, "JSON", 0},
		{"resubmit with an array", "alice", http.MethodPost, resubmit, `[1]`, 400, "body", 0},
		{"resubmit with nothing", "alice", http.MethodPost, resubmit, ``, 201, "", 1},
		{"resubmit with white space", "alice", http.MethodPost, resubmit, " \n", 201, "", 1},
		{"resubmit with {}", "alice", http.MethodPost, resubmit, `{}`, 201, "", 1},
		{"drain with a reason", "admin", http.MethodPost, "/api/v1/nodes/none/drain", `{"reason":"disk"}`, 400, "reason", 0},
		{"drain with nothing", "admin", http.MethodPost, "/api/v1/nodes/none/drain", ``, 404, "", 0},
		{"clear with a field", "admin", http.MethodPost, "/api/v1/nodes/none/gpus/0/clear", `{"force":true}`, 400, "force", 0},
		{"disable with a field", "admin", http.MethodPost, "/api/v1/users/bob/disable", `{"until":"tomorrow"}`, 400, "until", 0},
		{"test notification with a field", "alice", http.MethodPost, "/api/v1/me/notifications/test", `{"to":"x@example.org"}`, 400, "to", 0},
	} {
		before := count()
		rec := ts.do(t, tc.role, tc.method, tc.target, tc.body)
		if rec.Code != tc.code {
			t.Errorf("%s: %d, want %d: %s", tc.name, rec.Code, tc.code, rec.Body)
			continue
		}
		if tc.field != "" {
			if msg := apiErrorOf(t, rec); !strings.Contains(msg, tc.field) {
				t.Errorf("%s: error %q does not name %s", tc.name, msg, tc.field)
			}
		}
		if got := count() - before; got != tc.newJobs {
			t.Errorf("%s: %d new jobs, want %d", tc.name, got, tc.newJobs)
		}
	}
	if u, err := ts.store.UserByName(ctx, "bob"); err != nil || u.Disabled() {
		t.Errorf("bob after a refused disable: %+v, %v; want him enabled", u, err)
	}
}
