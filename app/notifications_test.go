package app

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuportal/gpuportal/api"
)

// TestNotificationsAreOwn: each user reads, sets and tests only their
// own notifications, whatever their role; a disabled account is refused.
func TestNotificationsAreOwn(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.disabled(t)
	woken := 0
	how := Notifying{Wake: func() { woken++ }}
	email := "alice@lab.example"
	alice := Actor{User: f.users["alice"]}
	if err := f.app.SetNotifications(ctx, alice, how, api.NotificationSettingsUpdate{Email: &email}); err != nil {
		t.Fatal(err)
	}
	if k, err := f.app.TestNotification(ctx, alice, how); err != nil || k != 1 || woken != 1 {
		t.Fatalf("alice's test: %d queued, err %v, notifier woken %d times; want 1, nil, 1", k, err, woken)
	}
	for _, tc := range []struct {
		who  string
		want string // the email the actor reads back; "forbidden": refused
	}{
		{"alice", email},
		{"carol", ""},      // a member of alice's team
		{"visionlead", ""}, // her lead
		{"nlplead", ""},    // the lead of another team
		{"admin", ""},
		{"dora", "forbidden"}, // disabled
	} {
		t.Run(tc.who, func(t *testing.T) {
			a := Actor{User: f.users[tc.who]}
			st, err := f.app.NotificationSettings(ctx, a, how)
			if tc.want == "forbidden" {
				if KindOf(err) != Forbidden {
					t.Fatalf("settings: err = %v, want forbidden", err)
				}
				if err := f.app.SetNotifications(ctx, a, how, api.NotificationSettingsUpdate{Email: &email}); KindOf(err) != Forbidden {
					t.Errorf("set: err = %v, want forbidden", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Email != tc.want {
				t.Errorf("email = %q, want %q", st.Email, tc.want)
			}
			if ds, err := f.app.Deliveries(ctx, a); err != nil || len(ds) != len(st.Deliveries) ||
				(tc.who == "alice") != (len(ds) == 1) {
				t.Errorf("deliveries = %v, %v; want alice's test to alice alone", ds, err)
			}
			if tc.who != "alice" {
				if _, err := f.app.TestNotification(ctx, a, how); KindOf(err) != Invalid {
					t.Errorf("a test with nowhere to send it: err = %v, want invalid", err)
				}
			}
		})
	}
}

// TestSetNotificationsInvalid: a refused setting names its field.
func TestSetNotificationsInvalid(t *testing.T) {
	f := newFixture(t)
	alice := Actor{User: f.users["alice"]}
	how := Notifying{CheckURL: func(string) error { return errors.New("loopback") }}
	for _, tc := range []struct {
		name  string
		upd   api.NotificationSettingsUpdate
		field string
	}{
		{"email", api.NotificationSettingsUpdate{Email: ptr("not an address")}, "email"},
		{"webhook refused", api.NotificationSettingsUpdate{WebhookURL: ptr("http://127.0.0.1/")}, "webhook_url"},
		{"unknown event", api.NotificationSettingsUpdate{Events: &[]string{"nope"}}, "events"},
		{"hours", api.NotificationSettingsUpdate{HeldAfterHours: ptr(-1.0)}, "held_after_hours"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := f.app.SetNotifications(context.Background(), alice, how, tc.upd)
			var ae *Error
			if !errors.As(err, &ae) || ae.Kind != Invalid || ae.Field != tc.field {
				t.Fatalf("err = %v, want invalid %s", err, tc.field)
			}
		})
	}
}
