package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
)

// TestNotificationSettingsPage: the page and the API take the same
// settings, refuse bad ones naming the field, never show the webhook
// secret, and keep it unless it is replaced or removed.
func TestNotificationSettingsPage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	const secret = "do-not-show-me"
	post := func(path string, v url.Values) (int, string) {
		t.Helper()
		rec := ts.doAs(t, "alice", ts.sessions["alice"], http.MethodPost, path, v.Encode())
		return rec.Code, rec.Body.String()
	}
	settings := func() api.NotificationSettings {
		t.Helper()
		rec := ts.doAs(t, "alice", "", http.MethodGet, "/api/v1/me/notifications", "")
		var s api.NotificationSettings
		if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("GET settings: %d %s", rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), secret) {
			t.Errorf("the API shows the secret")
		}
		return s
	}

	for _, c := range []struct {
		name string
		form url.Values
		want string
	}{
		{"a bad address", url.Values{"email": {"alice"}}, "email:"},
		{"a webhook that is not http", url.Values{"webhook_url": {"file:///etc/passwd"}}, "webhook_url:"},
		{"a webhook to a loopback port", url.Values{"webhook_url": {"http://127.0.0.1:5432/"}}, "webhook_url: 127.0.0.1 is a loopback address"},
		{"a webhook to the metadata service", url.Values{"webhook_url": {"http://169.254.169.254/latest/meta-data/"}}, "webhook_url: 169.254.169.254 is a link-local address"},
		{"a webhook to a private address", url.Values{"webhook_url": {"https://[fd00::1]/hook"}}, "webhook_url: fd00::1 is a private address"},
		{"hours that are not a number", url.Values{"held_after_hours": {"soon"}}, "held_after_hours: must be a number"},
		{"held without hours", url.Values{"events": {"held"}}, "held_after_hours:"},
		{"an unknown event", url.Values{"events": {"exploded"}}, "events:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := post("/notifications", c.form)
			if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
				t.Errorf("status %d; want 400 saying %q", code, c.want)
			}
			if v := c.form.Get("email"); v != "" && !strings.Contains(body, `value="`+v+`"`) {
				t.Errorf("the refused form does not keep what was typed")
			}
		})
	}
	if code, body := post("/notifications/test", url.Values{}); code != http.StatusBadRequest || !strings.Contains(body, "nowhere to send") {
		t.Errorf("a test with no channel: %d", code)
	}

	code, body := post("/notifications", url.Values{"email": {"alice@example.org"}, "webhook_url": {"https://chat.example.org/hooks/abc"},
		"webhook_secret": {secret}, "events": {"failed", "held"}, "held_after_hours": {"1.5"}})
	if code != http.StatusOK || !strings.Contains(body, "Saved.") || strings.Contains(body, secret) {
		t.Fatalf("save: %d (or the page shows the secret)", code)
	}
	s := settings()
	if s.Email != "alice@example.org" || !s.WebhookSecretSet || strings.Join(s.Events, ",") != "failed,held" || s.HeldAfterHours != 1.5 {
		t.Errorf("saved %+v", s)
	}
	// Saving again without typing the secret keeps it; the box removes it.
	post("/notifications", url.Values{"email": {"alice@example.org"}, "events": {"failed"}})
	if s := settings(); !s.WebhookSecretSet || s.WebhookURL != "" || s.HeldAfterHours != 0 {
		t.Errorf("after a save without the secret: %+v", s)
	}
	post("/notifications", url.Values{"clear_secret": {"1"}})
	if s := settings(); s.WebhookSecretSet || len(s.Events) != 0 || s.Email != "" {
		t.Errorf("after removing the secret: %+v", s)
	}

	// The API changes only what it is given.
	rec := ts.doAs(t, "alice", "", http.MethodPut, "/api/v1/me/notifications", `{"email":"a@example.org"}`)
	rec2 := ts.doAs(t, "alice", "", http.MethodPut, "/api/v1/me/notifications", `{"events":["timed_out"]}`)
	if rec.Code != http.StatusOK || rec2.Code != http.StatusOK {
		t.Fatalf("PUT: %d, %d", rec.Code, rec2.Code)
	}
	if s := settings(); s.Email != "a@example.org" || strings.Join(s.Events, ",") != "timed_out" {
		t.Errorf("after two partial PUTs: %+v", s)
	}
	rec = ts.doAs(t, "alice", "", http.MethodPut, "/api/v1/me/notifications", `{"held_after_hours":"six"}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "held_after_hours") {
		t.Errorf("a string for hours: %d %s", rec.Code, rec.Body)
	}
	// Bob sees his own, empty, settings.
	rec = ts.doAs(t, "bob", "", http.MethodGet, "/api/v1/me/notifications", "")
	if strings.Contains(rec.Body.String(), "a@example.org") {
		t.Errorf("bob sees alice's settings")
	}
}
