package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestSafeNext(t *testing.T) {
	t.Parallel()
	tests := []struct{ next, want string }{
		{"/jobs/12", "/jobs/12"},
		{"/queues?scope=team&state=queued", "/queues?scope=team&state=queued"},
		{"/teams/vision#members", "/teams/vision"},
		{"/a%20b", "/a%20b"},
		{"", "/jobs"},
		{"jobs", "/jobs"},
		{"//evil.example", "/jobs"},
		{"/\t/evil.example", "/jobs"}, // browsers drop the tab: //evil.example
		{"/\n/evil.example", "/jobs"},
		{"/\r/evil.example", "/jobs"},
		{" //evil.example", "/jobs"},
		{"/\\evil.example", "/jobs"}, // browsers read \ as /
		{"\\\\evil.example", "/jobs"},
		{"/%2F/evil.example", "/jobs"},
		{"/%2fevil.example", "/jobs"},
		{"https://evil.example/", "/jobs"},
		{"https:/evil.example", "/jobs"},
		{"javascript:alert(1)", "/jobs"},
		{"///evil.example", "/jobs"},
		{"/\u00a0/evil.example", "/jobs"},
		{"/" + strings.Repeat("a", 3000), "/jobs"},
	}
	for _, tc := range tests {
		if got := safeNext(tc.next); got != tc.want {
			t.Errorf("safeNext(%q) = %q, want %q", tc.next, got, tc.want)
		}
	}
}

// TestAdminFormsValidate: every field as given, a 400 naming the field
// at fault, never a 500 and never a silent change.
func TestAdminFormsValidate(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	tests := []struct {
		name, action string
		form         url.Values
		field        string // the field the answer names; "" for success
	}{
		{"team name with a space", "create-team", url.Values{"name": {"a team"}, "guarantee": {"1"}}, "name:"},
		{"team name padded", "create-team", url.Values{"name": {" padded "}, "guarantee": {"1"}}, "name:"},
		{"team name too long", "create-team", url.Values{"name": {strings.Repeat("t", 65)}, "guarantee": {"1"}}, "name:"},
		{"team name with a slash", "create-team", url.Values{"name": {"a/b"}, "guarantee": {"1"}}, "name:"},
		{"guarantee not a number", "create-team", url.Values{"name": {"t1"}, "guarantee": {"two"}}, "guarantee:"},
		{"guarantee padded", "create-team", url.Values{"name": {"t1"}, "guarantee": {" 2"}}, "guarantee:"},
		{"guarantee negative", "create-team", url.Values{"name": {"t1"}, "guarantee": {"-1"}}, "guarantee:"},
		{"team made", "create-team", url.Values{"name": {"t1"}, "guarantee": {"2"}}, ""},
		{"user of no team", "create-user", url.Values{"name": {"u1"}, "role": {"researcher"}, "team": {"ghosts"}, "password": {"password1"}}, "team:"},
		{"researcher without a team", "create-user", url.Values{"name": {"u1"}, "role": {"researcher"}, "password": {"password1"}}, "team:"},
		{"unknown role", "create-user", url.Values{"name": {"u1"}, "role": {"root"}, "team": {"t1"}, "password": {"password1"}}, "role:"},
		{"short password", "create-user", url.Values{"name": {"u1"}, "role": {"researcher"}, "team": {"t1"}, "password": {"short"}}, "password:"},
		{"password beyond bcrypt", "create-user", url.Values{"name": {"u1"}, "role": {"researcher"}, "team": {"t1"}, "password": {strings.Repeat("p", 73)}}, "password:"},
		{"user name with a space", "create-user", url.Values{"name": {"u 1"}, "role": {"researcher"}, "team": {"t1"}, "password": {"password1"}}, "name:"},
		{"user made", "create-user", url.Values{"name": {"u1"}, "role": {"researcher"}, "team": {"t1"}, "password": {"password1"}}, ""},
		{"user exists", "create-user", url.Values{"name": {"u1"}, "role": {"researcher"}, "team": {"t1"}, "password": {"password1"}}, "name:"},
		{"role of nobody", "set-role", url.Values{"name": {"nobody"}, "role": {"lead"}, "team": {"t1"}}, "name:"},
		{"role in no team", "set-role", url.Values{"name": {"u1"}, "role": {"lead"}, "team": {"ghosts"}}, "team:"},
		{"reset of nobody", "reset-password", url.Values{"name": {"nobody"}, "password": {"password1"}}, "name:"},
		{"disable nobody", "disable-user", url.Values{"name": {"nobody"}}, "name:"},
		{"revoke a token of nobody", "revoke-token", url.Values{"name": {"nobody"}, "id": {"1"}}, "name:"},
		{"revoke a token without a number", "revoke-token", url.Values{"name": {"u1"}, "id": {"x"}}, "id:"},
		{"disable yourself", "disable-user", url.Values{"name": {"admin"}}, "name:"},
		{"disable", "disable-user", url.Values{"name": {"u1"}}, ""},
		{"enable", "enable-user", url.Values{"name": {"u1"}}, ""},
		{"delete", "delete-user", url.Values{"name": {"u1"}}, ""},
	}
	for _, tc := range tests {
		rec := ts.do(t, "admin", http.MethodPost, "/admin/"+tc.action, tc.form.Encode())
		body := rec.Body.String()
		switch {
		case rec.Code >= 500:
			t.Errorf("%s: status %d: %.300s", tc.name, rec.Code, body)
		case tc.field == "" && rec.Code != http.StatusOK:
			t.Errorf("%s: status %d, want 200: %.300s", tc.name, rec.Code, body)
		case tc.field != "" && (rec.Code < 400 || !strings.Contains(body, tc.field)):
			t.Errorf("%s: status %d, want a 4xx naming %q: %.300s", tc.name, rec.Code, tc.field, body)
		}
	}
	if _, err := ts.store.UserByName(context.Background(), "u1"); err == nil {
		t.Error("u1 still exists after delete")
	}
	log, err := ts.store.AuditLog(context.Background(), 20)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range log {
		actions = append(actions, e.Action)
	}
	for _, want := range []string{"user.disable", "user.enable", "user.delete"} {
		if !strings.Contains(strings.Join(actions, " "), want) {
			t.Errorf("audit log %v lacks %s", actions, want)
		}
	}
}

// TestAdminUnknownActionIsNotFound: a form posted to an action the admin
// page does not have is a 404, whatever its fields (before, one without a
// name got "name: is required", as if the action existed), and changes
// nothing.
func TestAdminUnknownActionIsNotFound(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	for _, form := range []url.Values{{}, {"name": {"t9"}}, {"name": {"a team"}}, {"name": {"t9"}, "guarantee": {"2"}}} {
		rec := ts.do(t, "admin", http.MethodPost, "/admin/create-teams", form.Encode())
		if rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "name:") {
			t.Errorf("form %v: status %d, want 404 naming no field: %.300s", form, rec.Code, rec.Body.String())
		}
	}
	if _, err := ts.store.Team(context.Background(), "t9"); err == nil {
		t.Error("a form posted to no action made team t9")
	}
}
