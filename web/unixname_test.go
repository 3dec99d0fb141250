package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestSetUnixName: an admin sets a user's Unix account through the API
// and the admin page's form; bad input is a 400 naming the field.
func TestSetUnixName(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	for _, tc := range []struct {
		name, role, method, target, body string
		want                             int
		wantBody                         string
	}{
		{"API", "admin", "PUT", "/api/v1/users/alice/unix-name", `{"unix_name":"asmith"}`, http.StatusOK, `"unix_name":"asmith"`},
		{"API: bad name", "admin", "PUT", "/api/v1/users/alice/unix-name", `{"unix_name":"A Smith"}`, http.StatusBadRequest, "unix_name:"},
		{"API: empty", "admin", "PUT", "/api/v1/users/alice/unix-name", `{"unix_name":""}`, http.StatusBadRequest, "unix_name: is required"},
		{"API: unknown field", "admin", "PUT", "/api/v1/users/alice/unix-name", `{"unix":"x"}`, http.StatusBadRequest, "unix"},
		{"API: unknown user", "admin", "PUT", "/api/v1/users/nosuch/unix-name", `{"unix_name":"x"}`, http.StatusNotFound, "no user nosuch"},
		{"API: not an admin", "lead", "PUT", "/api/v1/users/alice/unix-name", `{"unix_name":"x"}`, http.StatusForbidden, ""},
		{"form", "admin", "POST", "/admin/set-unix-name", "name=bob&unix_name=bjones", http.StatusOK, "run as the Unix account bjones"},
		{"form: bad name", "admin", "POST", "/admin/set-unix-name", "name=bob&unix_name=-x", http.StatusBadRequest, "unix_name:"},
		{"form: unknown user", "admin", "POST", "/admin/set-unix-name", "name=nosuch&unix_name=x", http.StatusBadRequest, "name:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, tc.role, tc.method, tc.target, tc.body)
			if rec.Code != tc.want || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("status %d, want %d with %q; body %.300s", rec.Code, tc.want, tc.wantBody, rec.Body.String())
			}
		})
	}
	ctx := context.Background()
	for user, want := range map[string]string{"alice": "asmith", "bob": "bjones", "lead": "lead"} {
		if got, err := ts.store.UnixName(ctx, user); got != want || err != nil {
			t.Errorf("UnixName(%s) = %q, %v; want %q", user, got, err, want)
		}
	}
}
