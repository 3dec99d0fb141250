package web

import (
	"net/http"
	"strings"
	"testing"
)

// TestAccountingFormat: the report comes as JSON or CSV; another format
// is a 400 naming the parameter. Who sees what is app's
// (app.TestAccountingScope).
func TestAccountingFormat(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	for _, tc := range []struct {
		query  string
		status int
		want   string
	}{
		{"format=xml", http.StatusBadRequest, "format:"},
		{"format=csv&by=user", http.StatusOK, "period,team,user,"},
		{"by=user", http.StatusOK, `"scope":"user alice"`},
		{"by=team", http.StatusForbidden, "by:"},
	} {
		rec := ts.doAs(t, "alice", "", http.MethodGet, "/api/v1/accounting?"+tc.query, "")
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %s; want %d with %q", tc.query, rec.Code, rec.Body, tc.status, tc.want)
		}
	}
}
