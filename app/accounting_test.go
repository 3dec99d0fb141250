package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/accounting"
)

// TestAccountingScope: researchers see only their own usage, leads their
// team's members', admins everyone's; asking beyond that is Forbidden
// naming the field, bad fields are Invalid naming them, and a disabled
// account sees nothing.
func TestAccountingScope(t *testing.T) {
	now := time.Date(2026, 11, 24, 15, 0, 0, 0, time.UTC)
	f := newFixture(t)
	f.disabled(t)
	f.app.cfg.Now = func() time.Time { return now }
	aliceKey, carolKey, bobKey := accounting.Key{Team: "vision", User: "alice"}, accounting.Key{Team: "vision", User: "carol"}, accounting.Key{Team: "nlp", User: "bob"}
	tests := []struct {
		name   string
		who    string
		q      api.AccountingQuery
		kind   Kind   // 0: accepted
		want   string // the field in the error, or the scope
		sees   []accounting.Key
		hidden []accounting.Key
	}{
		{"an admin sees the cluster", "admin", api.AccountingQuery{}, 0, "cluster", []accounting.Key{aliceKey, bobKey}, nil},
		{"an admin may narrow to a team", "admin", api.AccountingQuery{Team: "nlp"}, 0, "team nlp", []accounting.Key{bobKey}, []accounting.Key{aliceKey}},
		{"a lead sees their team", "visionlead", api.AccountingQuery{By: "user"}, 0, "team vision", []accounting.Key{aliceKey, carolKey}, []accounting.Key{bobKey}},
		{"a lead may narrow to a member", "visionlead", api.AccountingQuery{By: "user", User: "alice"}, 0, "user alice", []accounting.Key{aliceKey}, []accounting.Key{carolKey}},
		{"a lead may not see another team", "visionlead", api.AccountingQuery{Team: "nlp"}, Forbidden, "team:", nil, nil},
		{"a lead may not see another team's member", "nlplead", api.AccountingQuery{By: "user", User: "alice"}, Forbidden, "user:", nil, nil},
		{"a lead may not see a user who is none", "nlplead", api.AccountingQuery{By: "user", User: "nobody"}, Forbidden, "user:", nil, nil},
		{"a member sees their own usage", "alice", api.AccountingQuery{}, 0, "user alice", []accounting.Key{aliceKey}, []accounting.Key{carolKey, bobKey}},
		{"a member may not ask by team", "alice", api.AccountingQuery{By: "team"}, Forbidden, "by:", nil, nil},
		{"a member may not see another member", "alice", api.AccountingQuery{By: "user", User: "carol"}, Forbidden, "user:", nil, nil},
		{"a member may not see another team", "alice", api.AccountingQuery{By: "user", Team: "nlp"}, Forbidden, "team:", nil, nil},
		{"a disabled user sees nothing", "dora", api.AccountingQuery{By: "user"}, Forbidden, "disabled", nil, nil},
		{"a bad day names from", "admin", api.AccountingQuery{From: "2026-13-01"}, Invalid, "from:", nil, nil},
		{"to before from", "admin", api.AccountingQuery{From: "2026-11-10", To: "2026-11-01"}, Invalid, "to:", nil, nil},
		{"too long a range", "admin", api.AccountingQuery{From: "2024-01-01", To: "2026-01-01"}, Invalid, "to:", nil, nil},
		{"a bad grouping names by", "admin", api.AccountingQuery{By: "node"}, Invalid, "by:", nil, nil},
		{"a bad period names period", "admin", api.AccountingQuery{Period: "week"}, Invalid, "period:", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := Actor{User: f.users[tc.who]}
			rep, err := f.app.Accounting(context.Background(), a, tc.q, 5)
			if tc.kind != 0 {
				var ae *Error
				if !errors.As(err, &ae) || ae.Kind != tc.kind || !strings.Contains(ae.Msg, tc.want) {
					t.Fatalf("err = %v; want %v naming %q", err, tc.kind, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Scope != tc.want {
				t.Errorf("scope %q, want %q", rep.Scope, tc.want)
			}
			r, err := parseAccounting(tc.q, a, now)
			if err != nil {
				t.Fatal(err)
			}
			include, _, err := accountingScope(a, r)
			if err != nil {
				t.Fatal(err)
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
	rep, err := f.app.Accounting(context.Background(), Actor{User: f.users["admin"]}, api.AccountingQuery{}, 5)
	if err != nil || rep.From != "2026-11-01" || rep.To != "2026-11-24" || rep.By != "team" || rep.Period != "day" {
		t.Errorf("defaults: %+v, %v", rep, err)
	}
	if r := AccountingRightsOf(Actor{User: f.users["alice"]}); r != (AccountingRights{}) {
		t.Errorf("a member's rights: %+v, want none", r)
	}
	if r := AccountingRightsOf(Actor{User: f.users["visionlead"]}); r != (AccountingRights{ByTeam: true, PickUser: true}) {
		t.Errorf("a lead's rights: %+v", r)
	}
}
