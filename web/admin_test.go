package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/models"
)

// TestAdminActions checks each form of the admin page: what it changes,
// and that bad input is refused with a 400 whose message names the field.
func TestAdminActions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		action string
		form   url.Values
		status int
		says   string // in the page: the notice, or the field at fault
	}{
		{"create a team", "create-team", url.Values{"name": {"robotics"}, "guarantee": {"2"}}, 200, "Team robotics created."},
		{"a team needs a name", "create-team", url.Values{"name": {""}, "guarantee": {"2"}}, 400, "name: "},
		{"a name has at most 64 characters", "create-team", url.Values{"name": {strings.Repeat("x", 65)}, "guarantee": {"0"}}, 400, "name: is 65 characters long; at most 64"},
		{"a guarantee is a whole number", "create-team", url.Values{"name": {"t2"}, "guarantee": {"1.5"}}, 400, "guarantee: must be"},
		{"a guarantee is not negative", "create-team", url.Values{"name": {"t3"}, "guarantee": {"-1"}}, 400, "guarantee: must be"},
		{"a team exists once", "create-team", url.Values{"name": {"vision"}, "guarantee": {"1"}}, 400, "name: team vision already exists"},
		{"create a researcher", "create-user", url.Values{"name": {"carol"}, "role": {"researcher"}, "team": {"nlp"}, "password": {"correct horse"}}, 200, "User carol created."},
		{"create an admin without a team", "create-user", url.Values{"name": {"root2"}, "role": {"admin"}, "password": {"correct horse"}}, 200, "User root2 created."},
		{"a researcher needs a team", "create-user", url.Values{"name": {"dan"}, "role": {"researcher"}, "password": {"correct horse"}}, 400, "team: a researcher needs a team"},
		{"the team must exist", "create-user", url.Values{"name": {"dan"}, "role": {"lead"}, "team": {"nope"}, "password": {"correct horse"}}, 400, "team: no team &#34;nope&#34;"},
		{"the role must be known", "create-user", url.Values{"name": {"dan"}, "role": {"owner"}, "team": {"nlp"}, "password": {"correct horse"}}, 400, "role: must be researcher, lead or admin"},
		{"a password has 8 characters", "create-user", url.Values{"name": {"dan"}, "role": {"researcher"}, "team": {"nlp"}, "password": {"short"}}, 400, "password: must be at least 8 characters"},
		{"a user exists once", "create-user", url.Values{"name": {"alice"}, "role": {"researcher"}, "team": {"nlp"}, "password": {"correct horse"}}, 400, "name: user alice already exists"},
		{"make bob a lead of vision", "set-role", url.Values{"name": {"bob"}, "role": {"lead"}, "team": {"vision"}}, 200, "bob is now lead of &#34;vision&#34;."},
		{"an admin keeps their own role", "set-role", url.Values{"name": {"admin"}, "role": {"researcher"}, "team": {"vision"}}, 400, "name: you may not change your own role"},
		{"set the role of nobody", "set-role", url.Values{"name": {"nobody"}, "role": {"lead"}, "team": {"vision"}}, 400, "name: no user nobody"},
		{"set a role in no team", "set-role", url.Values{"name": {"bob"}, "role": {"lead"}, "team": {"nope"}}, 400, "team: no team &#34;nope&#34;"},
		{"reset a password", "reset-password", url.Values{"name": {"alice"}, "password": {"new password"}}, 200, "Password of alice reset:"},
		{"reset the password of nobody", "reset-password", url.Values{"name": {"nobody"}, "password": {"new password"}}, 400, "name: no user nobody"},
		{"a new password has 8 characters", "reset-password", url.Values{"name": {"alice"}, "password": {"short"}}, 400, "password: must be at least 8 characters"},
		{"an unknown action", "drop-tables", url.Values{"name": {"x"}}, 404, ""},
	}
	ts := newTestServer(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := ts.do(t, "admin", http.MethodPost, "/admin/"+c.action, c.form.Encode())
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body)
			}
			if c.says != "" && !strings.Contains(rec.Body.String(), c.says) {
				t.Errorf("the page does not say %q:\n%s", c.says, rec.Body)
			}
		})
	}
	ctx := context.Background()
	if u, err := ts.store.UserByName(ctx, "bob"); err != nil || u.Role != models.RoleLead || u.Team != "vision" {
		t.Errorf("bob after set-role: %+v, %v; want lead of vision", u, err)
	}
	if _, err := ts.store.Authenticate(ctx, "alice", "new password"); err != nil {
		t.Errorf("alice's new password: %v", err)
	}
	if _, err := ts.store.UserByName(ctx, "dan"); err == nil {
		t.Error("dan was created from a refused form")
	}
}
