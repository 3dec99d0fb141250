package api

import "time"

// NotificationSettings are a user's notification choices, as
// GET /api/v1/me/notifications answers them. The webhook secret is never
// shown: WebhookSecretSet says whether there is one.
type NotificationSettings struct {
	Email            string   `json:"email"`
	WebhookURL       string   `json:"webhook_url"`
	WebhookSecretSet bool     `json:"webhook_secret_set"`
	Events           []string `json:"events"`
	HeldAfterHours   float64  `json:"held_after_hours"`
	// AvailableEvents are the events one may choose.
	AvailableEvents []string `json:"available_events"`
	// EmailEnabled: the server sends email (its operator configured SMTP).
	EmailEnabled bool `json:"email_enabled"`
	// Deliveries are the latest notifications, newest first.
	Deliveries []Notification `json:"deliveries"`
}

// NotificationSettingsUpdate is the body of PUT /api/v1/me/notifications:
// the fields given replace the settings' ones, those left out keep
// theirs (a Go client leaves nil fields out: the document has no null
// here). An empty string clears email, webhook_url or webhook_secret.
type NotificationSettingsUpdate struct {
	Email          *string   `json:"email,omitempty"`
	WebhookURL     *string   `json:"webhook_url,omitempty"`
	WebhookSecret  *string   `json:"webhook_secret,omitempty"`
	Events         *[]string `json:"events,omitempty"`
	HeldAfterHours *float64  `json:"held_after_hours,omitempty"`
}

// Notification is one message to a user by one channel and where its
// delivery stands.
type Notification struct {
	ID      int64  `json:"id"`
	JobID   int64  `json:"job_id"` // 0 for a test
	Event   string `json:"event"`
	Channel string `json:"channel"` // email or webhook
	Detail  string `json:"detail"`
	// State: pending (NextAttemptAt says when it is tried), sent, failed
	// (given up after the last attempt) or dropped (its channel was
	// turned off first).
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"last_error"`
	NextAttemptAt *time.Time `json:"next_attempt_at"` // only while pending
	SentAt        *time.Time `json:"sent_at"`
	At            time.Time  `json:"at"` // when the event happened
}

// NotificationTest answers POST /api/v1/me/notifications/test.
type NotificationTest struct {
	// Queued is how many test notifications were queued: one per channel.
	Queued int `json:"queued"`
}
