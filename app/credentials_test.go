package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

// disabled adds dora, a researcher of vision whom an admin disabled, to
// f and returns her as the store has her now.
func (f *fixture) disabled(t *testing.T) *models.User {
	t.Helper()
	ctx := context.Background()
	if _, err := f.store.CreateUser(ctx, "dora", "password1", models.RoleResearcher, "vision"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.DisableUser(ctx, "dora", "admin", time.Now()); err != nil {
		t.Fatal(err)
	}
	u, err := f.store.UserByName(ctx, "dora")
	if err != nil {
		t.Fatal(err)
	}
	f.users["dora"] = userView(u)
	return u
}

// TestCredentials: a session or an API token names its user while the
// account is enabled; a disabled account's are refused, as is its
// password; a user revokes only their own tokens.
func TestCredentials(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	alice := Actor{User: f.users["alice"]}
	session, err := f.app.StartSession(ctx, alice.User, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := f.app.CreateToken(ctx, alice, "laptop", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dora := f.disabled(t)
	doraToken, err := f.store.CreateAPIToken(ctx, dora.ID, "old", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		get  func() (*User, error)
		want string // "": refused as not found
	}{
		{"alice's session", func() (*User, error) { return f.app.SessionUser(ctx, session) }, "alice"},
		{"alice's token", func() (*User, error) { return f.app.TokenUser(ctx, tok.Token) }, "alice"},
		{"a session is no token", func() (*User, error) { return f.app.TokenUser(ctx, session) }, ""},
		{"an unknown session", func() (*User, error) { return f.app.SessionUser(ctx, "nope") }, ""},
		{"a disabled user's token", func() (*User, error) { return f.app.TokenUser(ctx, doraToken) }, ""},
		{"the development token", func() (*User, error) { return f.app.DevTokenUser(ctx) }, "admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := tc.get()
			if tc.want == "" {
				if KindOf(err) != NotFound {
					t.Fatalf("err = %v, want not found", err)
				}
				return
			}
			if err != nil || u.Name != tc.want {
				t.Fatalf("user %v, err %v; want %s", u, err, tc.want)
			}
		})
	}
	if _, err := f.store.Authenticate(ctx, "dora", "password1"); !errors.Is(err, ErrDisabled) {
		t.Errorf("disabled password sign-in: err = %v, want ErrDisabled", err)
	}

	own, err := f.app.OwnTokens(ctx, alice)
	if err != nil || len(own) != 1 || own[0].Name != "laptop" {
		t.Fatalf("alice's tokens = %v, %v", own, err)
	}
	for _, who := range []string{"carol", "visionlead", "nlplead", "admin"} {
		if err := f.app.RevokeOwnToken(ctx, Actor{User: f.users[who]}, own[0].ID); KindOf(err) != NotFound {
			t.Errorf("%s revokes alice's token as their own: err = %v, want not found", who, err)
		}
	}
	if err := f.app.RevokeOwnToken(ctx, alice, own[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.app.TokenUser(ctx, tok.Token); KindOf(err) != NotFound {
		t.Errorf("a revoked token: err = %v, want not found", err)
	}
	if err := f.app.EndSession(ctx, session); err != nil {
		t.Fatal(err)
	}
	if _, err := f.app.SessionUser(ctx, session); KindOf(err) != NotFound {
		t.Errorf("an ended session: err = %v, want not found", err)
	}

	if _, err := f.store.DisableUser(ctx, "admin", "nlplead", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.app.DevTokenUser(ctx); KindOf(err) != NotFound {
		t.Errorf("development token with the admin disabled: err = %v, want not found", err)
	}
}

// TestCreateTokenInvalid: a new token's name and lifetime are checked,
// naming the field.
func TestCreateTokenInvalid(t *testing.T) {
	f := newFixture(t)
	alice := Actor{User: f.users["alice"]}
	for _, tc := range []struct {
		name, token string
		ttl         time.Duration
		field       string
	}{
		{"no name", "", time.Hour, "name"},
		{"spaces", " x", time.Hour, "name"},
		{"long name", string(make([]byte, MaxTokenName+1)), time.Hour, "name"},
		{"no time", "x", 0, "days"},
		{"over a year", "x", (MaxTokenDays + 1) * 24 * time.Hour, "days"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.app.CreateToken(context.Background(), alice, tc.token, tc.ttl)
			var ae *Error
			if !errors.As(err, &ae) || ae.Kind != Invalid || ae.Field != tc.field {
				t.Fatalf("err = %v, want invalid %s", err, tc.field)
			}
		})
	}
}
