package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAdminOnlyRefusalsSayWhat: what a team's lead may not do of their
// own team's tuning, or of a machine, is refused naming what only admins
// may do (and, for the team's share, what the lead may do instead). It
// used to be "only admins may do this" for all of it: an audit, as lead,
// got that for PATCH /api/v1/teams/vision {"guaranteed_gpus": 8}, for
// PUT .../batch-policy and for POST /api/v1/nodes/node-0/resume.
func TestAdminOnlyRefusalsSayWhat(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	for _, c := range []struct {
		method, path, body string
		want               []string
	}{
		{http.MethodPatch, "/api/v1/teams/vision", `{"guaranteed_gpus": 8}`, []string{"guaranteed GPUs", "weight", "cap each member"}},
		{http.MethodPut, "/api/v1/teams/vision/batch-policy", `{"priorities": ["high", "normal"], "high_gpus": 4}`, []string{"batch priorities"}},
		{http.MethodPost, "/api/v1/nodes/node-0/drain", "", []string{"drain, cordon or resume a machine"}},
		{http.MethodPost, "/api/v1/nodes/node-0/resume", "", []string{"drain, cordon or resume a machine"}},
		{http.MethodPost, "/api/v1/nodes/node-0/gpus/0/clear", "", []string{"GPU back in service"}},
	} {
		rec := ts.do(t, "lead", c.method, c.path, c.body)
		var e struct{ Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusForbidden {
			t.Errorf("%s %s as lead: %d %s, want 403", c.method, c.path, rec.Code, rec.Body)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(e.Error, w) {
				t.Errorf("%s %s as lead: %q does not say %q", c.method, c.path, e.Error, w)
			}
		}
	}
}
