package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// Each user's notifications: their settings (email, webhook, events),
// the latest sent, and a test. Everyone reaches only their own; the
// notifier (package notify) delivers them.

// DeliveriesShown is how many of the latest notifications are shown.
const DeliveriesShown = 20

// The events a user may be told of (api.Notification.Event), and the
// state of one not sent yet (api.Notification.State).
const (
	EventTimedOut  = models.EventTimedOut
	EventHeld      = models.EventHeld
	EventIdle      = models.EventIdle
	EventReclaimed = models.EventReclaimed
	NotifyPending  = models.NotifyPending
)

// NotificationStore is what the notification settings read and write.
type NotificationStore interface {
	NotificationSettings(ctx context.Context, userID int64) (*models.NotificationSettings, error)
	SetNotificationSettings(ctx context.Context, n *models.NotificationSettings, now time.Time) error
	Notifications(ctx context.Context, userID int64, limit int) ([]models.Notification, error)
	EnqueueTestNotification(ctx context.Context, userID int64, now time.Time) (int, error)
}

// Notifying is how this server delivers notifications: whether it sends
// email, where webhooks may go, and the notifier to wake.
type Notifying struct {
	// EmailEnabled: the server sends email (serve --smtp-addr).
	EmailEnabled bool
	// CheckURL says why a webhook may not go to url (serve
	// --webhook-allow); nil: anywhere.
	CheckURL func(url string) error
	// Wake has the notifier deliver what was queued; nil: nothing.
	Wake func()
}

// notificationAPI is n as the API shows a notification.
func notificationAPI(n *models.Notification) api.Notification {
	out := api.Notification{ID: n.ID, JobID: n.JobID, Event: n.Event, Channel: n.Channel, Detail: n.Detail,
		State: n.State, Attempts: n.Attempts, LastError: n.LastError, SentAt: n.SentAt, At: n.At}
	if n.State == models.NotifyPending {
		t := n.NextAttemptAt
		out.NextAttemptAt = &t
	}
	return out
}

// active refuses an actor whose account is disabled: its sessions and
// tokens are refused already; so is an action it asked for before.
func active(a Actor) error {
	if a.User == nil || a.User.Disabled() {
		return forbidden("this account is disabled: ask an admin")
	}
	return nil
}

// Deliveries are the actor's latest notifications, newest first.
func (s *App) Deliveries(ctx context.Context, a Actor) ([]api.Notification, error) {
	if err := active(a); err != nil {
		return nil, err
	}
	ds, err := s.cfg.Store.Notifications(ctx, a.User.ID, DeliveriesShown)
	if err != nil {
		return nil, stored(err)
	}
	out := make([]api.Notification, 0, len(ds))
	for i := range ds {
		out = append(out, notificationAPI(&ds[i]))
	}
	return out, nil
}

// NotificationSettings are the actor's own settings and latest
// notifications.
func (s *App) NotificationSettings(ctx context.Context, a Actor, how Notifying) (api.NotificationSettings, error) {
	if err := active(a); err != nil {
		return api.NotificationSettings{}, err
	}
	n, err := s.cfg.Store.NotificationSettings(ctx, a.User.ID)
	if err != nil {
		return api.NotificationSettings{}, stored(err)
	}
	ds, err := s.Deliveries(ctx, a)
	if err != nil {
		return api.NotificationSettings{}, err
	}
	return api.NotificationSettings{Email: n.Email, WebhookURL: n.WebhookURL, WebhookSecretSet: n.WebhookSecret != "",
		Events: append([]string{}, n.Events...), HeldAfterHours: n.HeldAfterHours,
		AvailableEvents: models.NotifyEvents, EmailEnabled: how.EmailEnabled, Deliveries: ds}, nil
}

// SetNotifications applies upd to the actor's own settings; a field upd
// leaves out keeps its value. A refusal is Invalid, naming the field.
func (s *App) SetNotifications(ctx context.Context, a Actor, how Notifying, upd api.NotificationSettingsUpdate) error {
	if err := active(a); err != nil {
		return err
	}
	n, err := s.cfg.Store.NotificationSettings(ctx, a.User.ID)
	if err != nil {
		return stored(err)
	}
	if upd.Email != nil {
		n.Email = strings.TrimSpace(*upd.Email)
	}
	if upd.WebhookURL != nil {
		n.WebhookURL = strings.TrimSpace(*upd.WebhookURL)
		// Checked again, after name resolution, at each connection.
		if how.CheckURL != nil {
			if err := how.CheckURL(n.WebhookURL); err != nil {
				return invalid("webhook_url", "webhook_url: %v: this server sends no webhooks to loopback, private, link-local or its own addresses unless its operator allows them (serve --webhook-allow)", err)
			}
		}
	}
	if upd.WebhookSecret != nil {
		n.WebhookSecret = *upd.WebhookSecret
	}
	if upd.Events != nil {
		n.Events = models.Strings(*upd.Events)
	}
	if upd.HeldAfterHours != nil {
		n.HeldAfterHours = *upd.HeldAfterHours
	}
	err = s.cfg.Store.SetNotificationSettings(ctx, n, s.cfg.Now())
	if errors.Is(err, models.ErrInvalid) {
		msg := strings.TrimSuffix(err.Error(), ": "+models.ErrInvalid.Error())
		field, _, _ := strings.Cut(msg, ":")
		return invalid(field, "%s", msg)
	}
	if err != nil {
		return stored(err)
	}
	// The audit names the channels, never the addresses or the secret.
	detail := fmt.Sprintf("email=%t webhook=%t secret=%t events=%s held_after_hours=%g",
		n.Email != "", n.WebhookURL != "", n.WebhookSecret != "", strings.Join(n.Events, ","), n.HeldAfterHours)
	return s.audit(ctx, a, "notifications.set", a.User.Name, detail)
}

// TestNotification queues a test by each of the actor's channels and
// returns how many it queued; none is Invalid: there is nowhere to send
// one.
func (s *App) TestNotification(ctx context.Context, a Actor, how Notifying) (int, error) {
	if err := active(a); err != nil {
		return 0, err
	}
	k, err := s.cfg.Store.EnqueueTestNotification(ctx, a.User.ID, s.cfg.Now())
	if err != nil {
		return 0, stored(err)
	}
	if k == 0 {
		return 0, invalid("email", "email, webhook_url: set one first: there is nowhere to send a test")
	}
	if how.Wake != nil {
		how.Wake()
	}
	return k, nil
}
