package web

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// noSuchID is the answer's "no such job: 42", and the number in it.
var noSuchID = regexp.MustCompile(`(?i)(no such (?:job|array):) \d+`)

// TestOtherTeamsJobsLookMissing: bob, of another team, gets for each of
// alice's jobs and arrays, on every route that names one, the very
// answer he gets for an ID that does not exist: 404, the same body but
// for the number. A 403 there would tell him which IDs exist, and so how
// much other teams submit, and when.
func TestOtherTeamsJobsLookMissing(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	job, array := ts.newJob(t), ts.newArray(t)
	const missing = 999999
	for _, c := range []struct {
		method, path, body string
		array              bool
	}{
		{http.MethodGet, "/api/v1/jobs/%d", "", false},
		{http.MethodGet, "/api/v1/jobs/%d/logs", "", false},
		{http.MethodGet, "/api/v1/jobs/%d/history", "", false},
		{http.MethodGet, "/api/v1/jobs/%d/usage", "", false},
		{http.MethodGet, "/api/v1/jobs/%d/memory", "", false},
		{http.MethodDelete, "/api/v1/jobs/%d", "", false},
		{http.MethodPost, "/api/v1/jobs/%d/resubmit", "", false},
		{http.MethodPost, "/api/v1/jobs/%d/keep-alive", `{"hours":1}`, false},
		{http.MethodGet, "/api/v1/arrays/%d", "", true},
		{http.MethodDelete, "/api/v1/arrays/%d", "", true},
		{http.MethodGet, "/jobs/%d", "", false},
		{http.MethodGet, "/jobs/%d/live", "", false},
		{http.MethodGet, "/jobs/%d/logs", "", false},
		{http.MethodGet, "/jobs/%d/usage", "", false},
		{http.MethodGet, "/jobs/%d/memory", "", false},
		{http.MethodGet, "/jobs/new?from=%d", "", false},
		{http.MethodPost, "/jobs/%d/cancel", "", false},
		{http.MethodPost, "/jobs/%d/keep-alive", "hours=1", false},
		{http.MethodPost, "/jobs/%d/template", "template_name=t", false},
		{http.MethodGet, "/arrays/%d", "", true},
		{http.MethodPost, "/arrays/%d/cancel", "", true},
	} {
		id := job
		if c.array {
			id = array
		}
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			theirs := ts.do(t, "bob", c.method, fmt.Sprintf(c.path, id), c.body)
			none := ts.do(t, "bob", c.method, fmt.Sprintf(c.path, missing), c.body)
			if theirs.Code != http.StatusNotFound || none.Code != http.StatusNotFound {
				t.Fatalf("another team's: %d, none: %d; want 404 for both", theirs.Code, none.Code)
			}
			a := noSuchID.ReplaceAllString(theirs.Body.String(), "$1 ID")
			b := noSuchID.ReplaceAllString(none.Body.String(), "$1 ID")
			if a != b {
				t.Errorf("the answers differ:\nanother team's: %.300s\nnone:           %.300s", a, b)
			}
			if strings.Contains(theirs.Body.String(), "vision") || strings.Contains(theirs.Body.String(), "alice") {
				t.Errorf("the answer names the job's team or owner: %.300s", theirs.Body.String())
			}
			if !noSuchID.MatchString(theirs.Body.String()) {
				t.Errorf("the answer does not say there is no such job: %.300s", theirs.Body.String())
			}
		})
	}
}
