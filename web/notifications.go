package web

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/templates"
)

// Each user's notifications: their settings page, GET/PUT
// /api/v1/me/notifications, and the test. Everyone reaches only their
// own; the notifier (package notify) delivers them.

// notifying is how this server delivers notifications (app.Notifying).
func (s *Server) notifying() app.Notifying {
	how := app.Notifying{EmailEnabled: s.cfg.EmailEnabled, CheckURL: s.cfg.Webhooks.CheckURL}
	if s.cfg.Notifier != nil {
		how.Wake = s.cfg.Notifier.Wake
	}
	return how
}

func (s *Server) apiNotifications(c echo.Context) error {
	out, err := s.app.NotificationSettings(c.Request().Context(), appActor(c), s.notifying())
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
	if err := s.app.SetNotifications(c.Request().Context(), appActor(c), s.notifying(), upd); err != nil {
		return err
	}
	return s.apiNotifications(c)
}

func (s *Server) apiTestNotification(c echo.Context) error {
	if err := noFields(c); err != nil {
		return err
	}
	k, err := s.app.TestNotification(c.Request().Context(), appActor(c), s.notifying())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, api.NotificationTest{Queued: k})
}

func (s *Server) notificationsPage(c echo.Context) error {
	return s.renderNotifications(c, http.StatusOK, "", "", nil)
}

// notificationsView is the page's view of u's settings; form, when not
// nil, is what the user sent (refused), shown again.
func (s *Server) notificationsView(c echo.Context, form *api.NotificationSettingsUpdate) (templates.Notifications, error) {
	st, err := s.app.NotificationSettings(c.Request().Context(), appActor(c), s.notifying())
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
		label := eventLabel(e)
		if e == app.EventIdle && appActor(c).User.Role == app.RoleLead {
			label += " (your team's jobs too)" // models.Store.EnqueueIdleNotification
		}
		v.Events = append(v.Events, templates.EventChoice{Name: e, Label: label, Chosen: slices.Contains(chosen, e)})
	}
	v.Deliveries = deliveryRows(st.Deliveries)
	return v, nil
}

func deliveryRows(ds []api.Notification) []templates.DeliveryRow {
	var out []templates.DeliveryRow
	for _, d := range ds {
		r := templates.DeliveryRow{JobID: d.JobID, Event: eventLabel(d.Event), Channel: d.Channel, State: d.State,
			Attempts: d.Attempts, LastError: d.LastError, At: d.At.Local().Format(timeLayout), Detail: d.Detail, Label: d.State}
		if d.State == app.NotifyPending && d.Attempts > 0 {
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
	case app.EventTimedOut:
		return "timed out"
	case app.EventHeld:
		return "waiting too long"
	case app.EventIdle:
		return "idle, to be reclaimed"
	case app.EventReclaimed:
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
	rows, err := s.app.Deliveries(c.Request().Context(), appActor(c))
	if err != nil {
		return err
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
	err = s.app.SetNotifications(c.Request().Context(), appActor(c), s.notifying(), upd)
	if app.KindOf(err) == app.Invalid {
		return s.renderNotifications(c, http.StatusBadRequest, err.Error(), "", &upd)
	}
	if err != nil {
		return err
	}
	return s.renderNotifications(c, http.StatusOK, "", "Saved.", nil)
}

func (s *Server) testNotificationForm(c echo.Context) error {
	k, err := s.app.TestNotification(c.Request().Context(), appActor(c), s.notifying())
	if app.KindOf(err) == app.Invalid {
		return s.renderNotifications(c, http.StatusBadRequest, "Set an email address or a webhook URL first: there is nowhere to send a test.", "", nil)
	}
	if err != nil {
		return err
	}
	msg := "A test notification was queued"
	if k > 1 {
		msg = fmt.Sprintf("%d test notifications were queued (one per channel)", k)
	}
	return s.renderNotifications(c, http.StatusOK, "", msg+": the table below shows whether it arrived.", nil)
}
