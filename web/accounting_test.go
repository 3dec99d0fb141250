package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/accounting"
	"github.com/gpuportal/gpuportal/models"
)

// TestAccountingQuery: bad parameters are 400s naming the parameter;
// researchers see only their own usage, leads their team's, admins all,
// and asking beyond that is 403.
func TestAccountingQuery(t *testing.T) {
	now := time.Date(2026, 11, 24, 15, 0, 0, 0, time.UTC)
	admin := &models.User{Name: "root", Role: models.RoleAdmin}
	lead := &models.User{Name: "lena", Role: models.RoleLead, Team: "nlp"}
	alice := &models.User{Name: "alice", Role: models.RoleResearcher, Team: "nlp"}
	tests := []struct {
		name   string
		user   *models.User
		query  string
		status int    // 0: accepted
		want   string // in the error, or the scope
		sees   []accounting.Key
		hidden []accounting.Key
	}{
		{"an admin sees the cluster", admin, "", 0, "cluster",
			[]accounting.Key{{Team: "nlp", User: "alice"}, {Team: "vision", User: "bob"}}, nil},
		{"an admin may narrow to a team", admin, "team=vision", 0, "team vision",
			[]accounting.Key{{Team: "vision", User: "bob"}}, []accounting.Key{{Team: "nlp", User: "alice"}}},
		{"a lead sees their team", lead, "by=user", 0, "team nlp",
			[]accounting.Key{{Team: "nlp", User: "alice"}}, []accounting.Key{{Team: "vision", User: "bob"}}},
		{"a lead may not see another team", lead, "team=vision", http.StatusForbidden, "team:", nil, nil},
		{"a researcher sees their own usage", alice, "", 0, "user alice",
			[]accounting.Key{{Team: "nlp", User: "alice"}}, []accounting.Key{{Team: "nlp", User: "carol"}}},
		{"a researcher may not ask by team", alice, "by=team", http.StatusForbidden, "by:", nil, nil},
		{"a researcher may not see another user", alice, "by=user&user=carol", http.StatusForbidden, "user:", nil, nil},
		{"a bad day names from", admin, "from=2026-13-01", http.StatusBadRequest, "from:", nil, nil},
		{"to before from", admin, "from=2026-11-10&to=2026-11-01", http.StatusBadRequest, "to:", nil, nil},
		{"too long a range", admin, "from=2024-01-01&to=2026-01-01", http.StatusBadRequest, "to:", nil, nil},
		{"a bad grouping names by", admin, "by=node", http.StatusBadRequest, "by:", nil, nil},
		{"a bad period names period", admin, "period=week", http.StatusBadRequest, "period:", nil, nil},
		{"a bad format names format", admin, "format=xml", http.StatusBadRequest, "format:", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			aq, err := parseAccountingQuery(q, tc.user, now)
			var include func(accounting.Key) bool
			var scope string
			if err == nil {
				include, scope, err = accountingScope(tc.user, aq)
			}
			if tc.status != 0 {
				var he *echo.HTTPError
				if !errors.As(err, &he) || he.Code != tc.status || !strings.Contains(he.Message.(string), tc.want) {
					t.Fatalf("err = %v; want %d naming %q", err, tc.status, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if scope != tc.want {
				t.Errorf("scope %q, want %q", scope, tc.want)
			}
			for _, k := range tc.sees {
				if !include(k) {
					t.Errorf("%v hidden", k)
				}
			}
			for _, k := range tc.hidden {
				if include(k) {
					t.Errorf("%v shown", k)
				}
			}
		})
	}
	aq, _ := parseAccountingQuery(url.Values{}, admin, now)
	if aq.from.Format(time.DateOnly) != "2026-11-01" || aq.to.Format(time.DateOnly) != "2026-11-24" || aq.by != accounting.ByTeam || aq.period != accounting.PerDay {
		t.Errorf("defaults: %+v", aq)
	}
}
