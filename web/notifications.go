package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// Each user's notifications: their settings page, GET/PUT
// /api/v1/me/notifications, and the test. Everyone reaches only their
// own; the notifier (package notify) delivers them.

// deliveriesShown is how many of the latest notifications the page and
// the API show.
const deliveriesShown = 20

// notificationSettings converts a user's settings and latest
// notifications.
func (s *Server) notificationSettings(ctx context.Context, u *models.User) (api.NotificationSettings, error) {
	n, err := s.cfg.Store.NotificationSettings(ctx, u.ID)
	if err != nil {
		return api.NotificationSettings{}, err
	}
	ds, err := s.cfg.Store.Notifications(ctx, u.ID, deliveriesShown)
	if err != nil {
		return api.NotificationSettings{}, err
	}
	out := api.NotificationSettings{Email: n.Email, WebhookURL: n.WebhookURL, WebhookSecretSet: n.WebhookSecret != "",
		Events: append([]string{}, n.Events...), HeldAfterHours: n.HeldAfterHours,
		AvailableEvents: models.NotifyEvents, EmailEnabled: s.cfg.EmailEnabled, Deliveries: []api.Notification{}}
	for i := range ds {
		out.Deliveries = append(out.Deliveries, notificationOf(&ds[i]))
	}
	return out, nil
}

// notificationOf converts one notification.
func notificationOf(n *models.Notification) api.Notification {
	out := api.Notification{ID: n.ID, JobID: n.JobID, Event: n.Event, Channel: n.Channel, Detail: n.Detail,
		State: n.State, Attempts: n.Attempts, LastError: n.LastError, SentAt: n.SentAt, At: n.At}
	if n.State == models.NotifyPending {
		t := n.NextAttemptAt
		out.NextAttemptAt = &t
	}
	return out
}

// setNotifications applies upd to u's settings: the service both the
// API and the form call. A refusal is an *echo.HTTPError naming the field.
func (s *Server) setNotifications(c echo.Context, u *models.User, upd api.NotificationSettingsUpdate) error {
	ctx := c.Request().Context()
	n, err := s.cfg.Store.NotificationSettings(ctx, u.ID)
	if err != nil {
		return err
	}
	if upd.Email != nil {
		n.Email = strings.TrimSpace(*upd.Email)
	}
	if upd.WebhookURL != nil {
		n.WebhookURL = strings.TrimSpace(*upd.WebhookURL)
		// Checked again, after name resolution, at each connection.
		if err := s.cfg.Webhooks.CheckURL(n.WebhookURL); err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(
				"webhook_url: %v: this server sends no webhooks to loopback, private, link-local or its own addresses unless its operator allows them (serve --webhook-allow)", err))
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
		return echo.NewHTTPError(http.StatusBadRequest, strings.TrimSuffix(err.Error(), ": "+models.ErrInvalid.Error()))
	}
	if err != nil {
		return err
	}
	// The audit names the channels, never the addresses or the secret.
	detail := fmt.Sprintf("email=%t webhook=%t secret=%t events=%s held_after_hours=%g",
		n.Email != "", n.WebhookURL != "", n.WebhookSecret != "", strings.Join(n.Events, ","), n.HeldAfterHours)
	return s.audit(c, "notifications.set", u.Name, detail)
}

// testNotification queues a test by each of u's channels.
func (s *Server) testNotification(c echo.Context, u *models.User) (int, error) {
	k, err := s.cfg.Store.EnqueueTestNotification(c.Request().Context(), u.ID, s.cfg.Now())
	if err != nil {
		return 0, err
	}
	if k > 0 && s.cfg.Notifier != nil {
		s.cfg.Notifier.Wake()
	}
	return k, nil
}

func (s *Server) apiNotifications(c echo.Context) error {
	out, err := s.notificationSettings(c.Request().Context(), currentUser(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiSetNotifications(c echo.Context) error {
	var upd api.NotificationSettingsUpdate
	if err := decodeJSON(c, &upd); err != nil {
		return err
	}
	u := currentUser(c)
	if err := s.setNotifications(c, u, upd); err != nil {
		return err
	}
	return s.apiNotifications(c)
}

func (s *Server) apiTestNotification(c echo.Context) error {
	k, err := s.testNotification(c, currentUser(c))
	if err != nil {
		return err
	}
	if k == 0 {
		return echo.NewHTTPError(http.StatusBadRequest, "email, webhook_url: set one first: there is nowhere to send a test")
	}
	return c.JSON(http.StatusAccepted, api.NotificationTest{Queued: k})
}

func (s *Server) notificationsPage(c echo.Context) error {
	return s.renderNotifications(c, http.StatusOK, "", "", nil)
}

// notificationsView is the page's view of u's settings; form, when not
// nil, is what the user sent (refused), shown again.
func (s *Server) notificationsView(c echo.Context, form *api.NotificationSettingsUpdate) (templates.Notifications, error) {
	u := currentUser(c)
	st, err := s.notificationSettings(c.Request().Context(), u)
	if err != nil {
		return templates.Notifications{}, err
	}
	v := templates.Notifications{Email: st.Email, WebhookURL: st.WebhookURL, SecretSet: st.WebhookSecretSet,
		HeldAfterHours: strconv.FormatFloat(st.HeldAfterHours, 'f', -1, 64), EmailEnabled: st.EmailEnabled}
	chosen := st.Events
	if form != nil {
		v.Email, v.WebhookURL = deref(form.Email), deref(form.WebhookURL)
		if form.Events != nil {
			chosen = *form.Events
		}
		if form.HeldAfterHours != nil {
			v.HeldAfterHours = strconv.FormatFloat(*form.HeldAfterHours, 'f', -1, 64)
		}
	}
	for _, e := range st.AvailableEvents {
		v.Events = append(v.Events, templates.EventChoice{Name: e, Label: eventLabel(e), Chosen: slices.Contains(chosen, e)})
	}
	v.Deliveries = deliveryRows(st.Deliveries)
	return v, nil
}

func deliveryRows(ds []api.Notification) []templates.DeliveryRow {
	var out []templates.DeliveryRow
	for _, d := range ds {
		r := templates.DeliveryRow{JobID: d.JobID, Event: eventLabel(d.Event), Channel: d.Channel, State: d.State,
			Attempts: d.Attempts, LastError: d.LastError, At: d.At.Local().Format(timeLayout), Detail: d.Detail, Label: d.State}
		if d.State == models.NotifyPending && d.Attempts > 0 {
			r.Label = "retrying"
		}
		if d.NextAttemptAt != nil {
			r.NextAttempt = d.NextAttemptAt.Local().Format(timeLayout)
		}
		if d.SentAt != nil {
			r.Sent = d.SentAt.Local().Format(timeLayout)
		}
		out = append(out, r)
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// eventLabel is an event's name for people.
func eventLabel(e string) string {
	switch e {
	case models.EventTimedOut:
		return "timed out"
	case models.EventHeld:
		return "waiting too long"
	case models.EventIdle:
		return "idle, to be reclaimed"
	case models.EventReclaimed:
		return "session reclaimed"
	}
	return e
}

func (s *Server) renderNotifications(c echo.Context, status int, flash, notice string, form *api.NotificationSettingsUpdate) error {
	v, err := s.notificationsView(c, form)
	if err != nil {
		return err
	}
	p := page(c, "Notifications", "notifications")
	p.Flash, p.Notice = flash, notice
	return s.render(c, status, templates.NotificationsPage(p, v))
}

// notificationDeliveries is the table of the latest notifications, which
// the page refreshes.
func (s *Server) notificationDeliveries(c echo.Context) error {
	ds, err := s.cfg.Store.Notifications(c.Request().Context(), currentUser(c).ID, deliveriesShown)
	if err != nil {
		return err
	}
	rows := make([]api.Notification, len(ds))
	for i := range ds {
		rows[i] = notificationOf(&ds[i])
	}
	return s.render(c, http.StatusOK, templates.DeliveriesTable(deliveryRows(rows)))
}

func (s *Server) notificationsForm(c echo.Context) error {
	f, err := c.FormParams()
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "the form could not be read")
	}
	email, hook := f.Get("email"), f.Get("webhook_url")
	events := f["events"]
	if events == nil {
		events = []string{}
	}
	upd := api.NotificationSettingsUpdate{Email: &email, WebhookURL: &hook, Events: &events}
	if sec := f.Get("webhook_secret"); sec != "" {
		upd.WebhookSecret = &sec
	} else if f.Get("clear_secret") != "" {
		empty := ""
		upd.WebhookSecret = &empty
	}
	if h := strings.TrimSpace(f.Get("held_after_hours")); h != "" {
		v, err := strconv.ParseFloat(h, 64)
		if err != nil {
			return s.renderNotifications(c, http.StatusBadRequest, "held_after_hours: must be a number of hours", "", &upd)
		}
		upd.HeldAfterHours = &v
	} else {
		zero := 0.0
		upd.HeldAfterHours = &zero
	}
	err = s.setNotifications(c, currentUser(c), upd)
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusBadRequest {
		return s.renderNotifications(c, http.StatusBadRequest, fmt.Sprint(he.Message), "", &upd)
	}
	if err != nil {
		return err
	}
	return s.renderNotifications(c, http.StatusOK, "", "Saved.", nil)
}

func (s *Server) testNotificationForm(c echo.Context) error {
	k, err := s.testNotification(c, currentUser(c))
	if err != nil {
		return err
	}
	if k == 0 {
		return s.renderNotifications(c, http.StatusBadRequest, "Set an email address or a webhook URL first: there is nowhere to send a test.", "", nil)
	}
	msg := "A test notification was queued"
	if k > 1 {
		msg = fmt.Sprintf("%d test notifications were queued (one per channel)", k)
	}
	return s.renderNotifications(c, http.StatusOK, "", msg+": the table below shows whether it arrived.", nil)
}
