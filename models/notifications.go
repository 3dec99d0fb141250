package models

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Notifications tell a job's owner, by email and/or a webhook, what
// happened to it (docs/operations.md). Each user chooses the events. The
// outbox (table notifications) gets one row per event and channel in the
// same transaction as the job's event, so nothing is lost and nothing is
// sent twice for one event; the leader's notifier (package notify)
// delivers the rows, retrying failures with backoff, and never holds the
// scheduler up.

// The events a user may be told of. EventTimedOut is the job state
// "timed_out" (a job stopped at its time limit), named here so that it is
// told as soon as the store records it.
const (
	EventStarted   = "started"
	EventSucceeded = "succeeded"
	EventFailed    = "failed"
	EventPreempted = "preempted"
	EventTimedOut  = "timed_out"
	EventCancelled = "cancelled"
	// EventHeld: the job has waited (queued or preempted) longer than the
	// user's HeldAfterHours.
	EventHeld = "held"
	// EventIdle: the job's GPUs are idle and it will be reclaimed (serve
	// --idle-reclaim-grace) unless they work again or it is kept alive.
	EventIdle = "idle"
	// EventReclaimed: the job's borrowed GPUs were reclaimed by a team
	// under its guarantee. Only a session's preemption is told so: the
	// scheduler preempts a session only then, as a last resort, and its
	// owner is told by every channel they set, whatever events they
	// chose (it is not in NotifyEvents).
	EventReclaimed = "reclaimed"
	// EventTest is the test a user sends from the settings page.
	EventTest = "test"
)

// NotifyEvents are the events a user may choose, in the order pages list them.
var NotifyEvents = []string{EventStarted, EventSucceeded, EventFailed, EventPreempted, EventTimedOut, EventCancelled, EventHeld, EventIdle}

// eventOfState is the event a job's entering state tells, "" for none.
func eventOfState(s JobState) string {
	switch s {
	case JobRunning:
		return EventStarted
	case JobSucceeded:
		return EventSucceeded
	case JobFailed:
		return EventFailed
	case JobPreempted:
		return EventPreempted
	case JobCancelled:
		return EventCancelled
	case JobTimedOut:
		return EventTimedOut
	}
	return ""
}

// The channels a notification goes by.
const (
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
)

// The states of a notification in the outbox.
const (
	NotifyPending = "pending" // not yet delivered: due at NextAttemptAt
	NotifySent    = "sent"
	NotifyFailed  = "failed" // gave up after MaxNotifyAttempts
	// NotifyDropped: the channel was turned off before delivery.
	NotifyDropped = "dropped"
)

// MaxNotifyAttempts is how many times a notification is tried before it
// is given up.
const MaxNotifyAttempts = 12

// MaxHeldAfterHours bounds HeldAfterHours (30 days).
const MaxHeldAfterHours = 720

// NotificationSettings are one user's choices.
type NotificationSettings struct {
	UserID int64 `gorm:"primaryKey;autoIncrement:false"`
	// Email, when set, receives the notifications (through the server's
	// SMTP server, serve --smtp-addr).
	Email string `gorm:"size:254;not null;default:''"`
	// WebhookURL, when set, receives them as JSON (Slack and Mattermost
	// incoming webhooks read its text and attachments).
	WebhookURL string `gorm:"size:2048;not null;default:''"`
	// WebhookSecret signs each webhook request (HMAC-SHA256); never
	// shown again once set.
	WebhookSecret string `gorm:"size:256;not null;default:''"`
	// Events are the events told (NotifyEvents).
	Events Strings `gorm:"type:text"`
	// HeldAfterHours: with the held event, a job waiting longer than this
	// is told of once per wait.
	HeldAfterHours float64 `gorm:"not null;default:0"`
	UpdatedAt      time.Time
}

// TableName is notification_settings.
func (NotificationSettings) TableName() string { return "notification_settings" }

// Wants reports whether the settings ask for event.
func (n *NotificationSettings) Wants(event string) bool { return slices.Contains(n.Events, event) }

// channels are the channels the settings name.
func (n *NotificationSettings) channels() []string {
	var out []string
	if n.Email != "" {
		out = append(out, ChannelEmail)
	}
	if n.WebhookURL != "" {
		out = append(out, ChannelWebhook)
	}
	return out
}

// Notification is one message to one user by one channel: the outbox.
type Notification struct {
	ID     int64 `gorm:"primaryKey"`
	UserID int64 `gorm:"index;not null"`
	// JobID and EventID name what it tells; 0 for a test.
	JobID   int64  `gorm:"not null;default:0"`
	EventID int64  `gorm:"not null;default:0"`
	Event   string `gorm:"size:16;not null"`
	Channel string `gorm:"size:16;not null"`
	// Detail is the event's reason or place, as the job's history has it.
	Detail string    `gorm:"size:512;not null;default:''"`
	At     time.Time `gorm:"not null"` // when the event happened
	// DedupeKey makes the row unique: one per event and channel.
	DedupeKey string `gorm:"size:128;uniqueIndex;not null"`
	State     string `gorm:"size:16;not null;index:idx_notifications_due,priority:1"`
	Attempts  int    `gorm:"not null;default:0"`
	LastError string `gorm:"size:512;not null;default:''"`
	// NextAttemptAt is when it is due; while an attempt is under way it
	// is pushed past the attempt's time limit, so that a leader that dies
	// meanwhile leaves it to be tried again.
	NextAttemptAt time.Time  `gorm:"not null;index:idx_notifications_due,priority:2"`
	SentAt        *time.Time // delivered
	CreatedAt     time.Time  `gorm:"not null"`
}

// TableName is notifications.
func (Notification) TableName() string { return "notifications" }

// CheckNotificationSettings says what is wrong with n, naming the field
// (as the API does), or nil.
func CheckNotificationSettings(n *NotificationSettings) error {
	if n.Email != "" {
		a, err := mail.ParseAddress(n.Email)
		if err != nil || a.Address != n.Email || len(n.Email) > 254 {
			return fmt.Errorf("email: %q is not an email address (name@example.org): %w", n.Email, ErrInvalid)
		}
	}
	if n.WebhookURL != "" {
		if err := CheckWebhookURL(n.WebhookURL); err != nil {
			return fmt.Errorf("webhook_url: %w: %w", err, ErrInvalid)
		}
	}
	if len(n.WebhookSecret) > 256 || strings.ContainsAny(n.WebhookSecret, "\r\n") {
		return fmt.Errorf("webhook_secret: at most 256 characters on one line: %w", ErrInvalid)
	}
	seen := map[string]bool{}
	for _, e := range n.Events {
		if !slices.Contains(NotifyEvents, e) {
			return fmt.Errorf("events: unknown event %q: want some of %s: %w", e, strings.Join(NotifyEvents, ", "), ErrInvalid)
		}
		if seen[e] {
			return fmt.Errorf("events: %q twice: %w", e, ErrInvalid)
		}
		seen[e] = true
	}
	if n.HeldAfterHours < 0 || n.HeldAfterHours > MaxHeldAfterHours || n.HeldAfterHours != n.HeldAfterHours {
		return fmt.Errorf("held_after_hours: must be from 0 to %d: %w", MaxHeldAfterHours, ErrInvalid)
	}
	if seen[EventHeld] && n.HeldAfterHours == 0 {
		return fmt.Errorf("held_after_hours: the held event needs a number of hours above 0: %w", ErrInvalid)
	}
	return nil
}

// CheckWebhookURL says why u cannot be a webhook URL: only absolute http
// and https URLs with a host, without user information, are.
func CheckWebhookURL(u string) error {
	if len(u) > 2048 {
		return errors.New("at most 2048 characters")
	}
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return fmt.Errorf("scheme %q: want http or https", p.Scheme)
	}
	if p.Host == "" || p.Hostname() == "" {
		return errors.New("no host")
	}
	if p.User != nil {
		return errors.New("user information in the URL is not allowed: use webhook_secret to authenticate")
	}
	if p.Fragment != "" {
		return errors.New("no fragment (#...) allowed")
	}
	return nil
}

// NotificationSettings returns a user's settings: the zero settings (no
// channel, no event) for a user who has not chosen.
func (s *Store) NotificationSettings(ctx context.Context, userID int64) (*NotificationSettings, error) {
	var n NotificationSettings
	err := s.db.WithContext(ctx).Where("user_id = ?", userID).Limit(1).Find(&n).Error
	if err != nil {
		return nil, fmt.Errorf("notification settings of user %d: %w", userID, err)
	}
	n.UserID = userID
	return &n, nil
}

// SetNotificationSettings checks and saves a user's settings. Pending
// notifications by a channel the settings turn off are dropped.
func (s *Store) SetNotificationSettings(ctx context.Context, n *NotificationSettings, now time.Time) error {
	if err := CheckNotificationSettings(n); err != nil {
		return err
	}
	n.UpdatedAt = now
	if n.Events == nil {
		n.Events = Strings{}
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "user_id"}}, UpdateAll: true}).Create(n).Error
		if err != nil {
			return fmt.Errorf("save notification settings of user %d: %w", n.UserID, err)
		}
		off := []string{}
		if n.Email == "" {
			off = append(off, ChannelEmail)
		}
		if n.WebhookURL == "" {
			off = append(off, ChannelWebhook)
		}
		if len(off) == 0 {
			return nil
		}
		err = tx.Model(&Notification{}).Where("user_id = ? AND state = ? AND channel IN ?", n.UserID, NotifyPending, off).
			Updates(map[string]any{"state": NotifyDropped, "last_error": "the channel was turned off before delivery"}).Error
		if err != nil {
			return fmt.Errorf("drop notifications of user %d: %w", n.UserID, err)
		}
		return nil
	})
}

// enqueueNotifications writes the outbox rows of event e of job j, in the
// transaction that records e: one per channel of the owner's, when the
// owner chose the event.
func enqueueNotifications(tx *gorm.DB, j *Job, e *JobEvent) error {
	event := eventOfState(e.State)
	if event == "" {
		return nil
	}
	always := false
	if event == EventPreempted && j.IsSession() {
		event, always = EventReclaimed, true
	}
	var ns []NotificationSettings
	err := tx.Table("notification_settings").Joins("JOIN users ON users.id = notification_settings.user_id").
		Where("users.name = ?", j.User).Select("notification_settings.*").Find(&ns).Error
	if err != nil {
		return fmt.Errorf("notification settings of %s: %w", j.User, err)
	}
	for i := range ns {
		if !always && !ns[i].Wants(event) {
			continue
		}
		for _, ch := range ns[i].channels() {
			key := fmt.Sprintf("event:%d:%s", e.ID, ch)
			if _, err := insertNotification(tx, ns[i].UserID, j.ID, e.ID, event, ch, e.Detail, e.At, key); err != nil {
				return err
			}
		}
	}
	return nil
}

// insertNotification adds a pending notification unless one with key
// exists, and reports whether it did.
func insertNotification(tx *gorm.DB, userID, jobID, eventID int64, event, channel, detail string, at time.Time, key string) (bool, error) {
	n := Notification{UserID: userID, JobID: jobID, EventID: eventID, Event: event, Channel: channel,
		Detail: truncate(detail, 512), At: at, DedupeKey: key, State: NotifyPending, NextAttemptAt: at, CreatedAt: at}
	res := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "dedupe_key"}}, DoNothing: true}).Create(&n)
	if res.Error != nil {
		return false, fmt.Errorf("queue %s notification %s: %w", channel, key, res.Error)
	}
	return res.RowsAffected > 0, nil
}

// EnqueueTestNotification queues a test by each of the user's channels
// and returns how many it queued: none when the user has no channel.
func (s *Store) EnqueueTestNotification(ctx context.Context, userID int64, now time.Time) (int, error) {
	n, err := s.NotificationSettings(ctx, userID)
	if err != nil {
		return 0, err
	}
	chs := n.channels()
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, ch := range chs {
			key := fmt.Sprintf("test:%d:%d:%s", userID, now.UnixNano(), ch)
			if _, err := insertNotification(tx, userID, 0, 0, EventTest, ch, "a test sent from the settings page", now, key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(chs), nil
}

// Notifications returns a user's latest notifications, newest first.
func (s *Store) Notifications(ctx context.Context, userID int64, limit int) ([]Notification, error) {
	var out []Notification
	err := s.db.WithContext(ctx).Where("user_id = ?", userID).Order("id DESC").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("notifications of user %d: %w", userID, err)
	}
	return out, nil
}

// ClaimNotifications returns up to limit pending notifications due at
// now, oldest first, and pushes their NextAttemptAt to now+lease, so
// that they are not claimed again while being delivered; a leader that
// dies mid-delivery leaves them due again after lease.
func (s *Store) ClaimNotifications(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Notification, error) {
	var out []Notification
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		q := tx.Where("state = ? AND next_attempt_at <= ?", NotifyPending, now).Order("next_attempt_at, id").Limit(limit)
		if tx.Dialector.Name() == "postgres" {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		if err := q.Find(&out).Error; err != nil {
			return fmt.Errorf("due notifications: %w", err)
		}
		if len(out) == 0 {
			return nil
		}
		ids := make([]int64, len(out))
		for i := range out {
			ids[i] = out[i].ID
		}
		if err := tx.Model(&Notification{}).Where("id IN ?", ids).Update("next_attempt_at", now.Add(lease)).Error; err != nil {
			return fmt.Errorf("claim notifications: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NotificationSent records a delivery.
func (s *Store) NotificationSent(ctx context.Context, id int64, at time.Time) error {
	err := s.db.WithContext(ctx).Model(&Notification{}).Where("id = ? AND state = ?", id, NotifyPending).
		Updates(map[string]any{"state": NotifySent, "sent_at": at, "attempts": gorm.Expr("attempts + 1"), "last_error": ""}).Error
	if err != nil {
		return fmt.Errorf("record notification %d sent: %w", id, err)
	}
	return nil
}

// NotificationFailed records a failed attempt: the notification is due
// again at retryAt, or, when retryAt is nil, given up.
func (s *Store) NotificationFailed(ctx context.Context, id int64, cause string, retryAt *time.Time) error {
	up := map[string]any{"attempts": gorm.Expr("attempts + 1"), "last_error": truncate(cause, 512)}
	if retryAt != nil {
		up["next_attempt_at"] = *retryAt
	} else {
		up["state"] = NotifyFailed
	}
	err := s.db.WithContext(ctx).Model(&Notification{}).Where("id = ? AND state = ?", id, NotifyPending).Updates(up).Error
	if err != nil {
		return fmt.Errorf("record notification %d failed: %w", id, err)
	}
	return nil
}

// DropNotification gives a notification up without an attempt, saying why.
func (s *Store) DropNotification(ctx context.Context, id int64, cause string) error {
	err := s.db.WithContext(ctx).Model(&Notification{}).Where("id = ? AND state = ?", id, NotifyPending).
		Updates(map[string]any{"state": NotifyDropped, "last_error": truncate(cause, 512)}).Error
	if err != nil {
		return fmt.Errorf("drop notification %d: %w", id, err)
	}
	return nil
}

// EnqueueHeldNotifications queues the held notification of each job that
// has waited (queued or preempted) longer than its owner's
// HeldAfterHours at now, once per wait, and returns how many it queued.
// Its queries per user do not grow with the number of waiting jobs.
func (s *Store) EnqueueHeldNotifications(ctx context.Context, now time.Time) (int, error) {
	var ns []NotificationSettings
	err := s.db.WithContext(ctx).Where("held_after_hours > 0").Find(&ns).Error
	if err != nil {
		return 0, fmt.Errorf("settings with held notifications: %w", err)
	}
	queued := 0
	for i := range ns {
		n := &ns[i]
		if !n.Wants(EventHeld) || len(n.channels()) == 0 {
			continue
		}
		k, err := s.enqueueHeld(ctx, n, now)
		queued += k
		if err != nil {
			return queued, err
		}
	}
	return queued, nil
}

// enqueueHeld queues the held notifications of one user's settings n.
func (s *Store) enqueueHeld(ctx context.Context, n *NotificationSettings, now time.Time) (int, error) {
	db := s.db.WithContext(ctx)
	u, err := s.UserByID(ctx, n.UserID)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	after := time.Duration(n.HeldAfterHours * float64(time.Hour))
	waiting := []JobState{JobQueued, JobPreempted}
	var jobs []Job
	err = db.Select("id", "reason").Where("\"user\" = ? AND state IN ? AND submitted_at <= ?", u.Name, waiting, now.Add(-after)).
		Find(&jobs).Error
	if err != nil || len(jobs) == 0 {
		return 0, wrapErr(err, "waiting jobs of "+u.Name)
	}
	ids := make([]int64, len(jobs))
	reason := make(map[int64]string, len(jobs))
	for i, j := range jobs {
		ids[i], reason[j.ID] = j.ID, j.Reason
	}
	// Each job's current wait began with its first event after its last
	// one in another state.
	var starts []int64
	err = db.Raw(`SELECT MIN(e.id) FROM job_events e WHERE e.job_id IN ? AND e.id > COALESCE(
		(SELECT MAX(x.id) FROM job_events x WHERE x.job_id = e.job_id AND x.state NOT IN ?), 0) GROUP BY e.job_id`,
		ids, waiting).Scan(&starts).Error
	if err != nil || len(starts) == 0 {
		return 0, wrapErr(err, "waits of "+u.Name+"'s jobs")
	}
	var es []JobEvent
	if err := db.Where("id IN ? AND at <= ?", starts, now.Add(-after)).Find(&es).Error; err != nil {
		return 0, fmt.Errorf("waits of %s's jobs: %w", u.Name, err)
	}
	chs := n.channels()
	keys := make([]string, 0, len(es)*len(chs))
	for _, e := range es {
		for _, ch := range chs {
			keys = append(keys, heldKey(e.ID, ch))
		}
	}
	if len(keys) == 0 {
		return 0, nil
	}
	var have []string
	if err := db.Model(&Notification{}).Where("dedupe_key IN ?", keys).Pluck("dedupe_key", &have).Error; err != nil {
		return 0, fmt.Errorf("held notifications of %s: %w", u.Name, err)
	}
	told := make(map[string]bool, len(have))
	for _, k := range have {
		told[k] = true
	}
	queued := 0
	err = db.Transaction(func(tx *gorm.DB) error {
		for _, e := range es {
			detail := "waiting since " + e.At.UTC().Format(time.RFC3339)
			if r := reason[e.JobID]; r != "" {
				detail += ": " + r
			}
			for _, ch := range chs {
				if told[heldKey(e.ID, ch)] {
					continue
				}
				added, err := insertNotification(tx, n.UserID, e.JobID, e.ID, EventHeld, ch, detail, now, heldKey(e.ID, ch))
				if err != nil {
					return err
				}
				if added {
					queued++
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return queued, nil
}

// heldKey is the DedupeKey of the held notification of the wait that
// began with event eventID.
func heldKey(eventID int64, channel string) string {
	return fmt.Sprintf("held:%d:%s", eventID, channel)
}

// wrapErr is err with context, nil for nil.
func wrapErr(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// deleteNotifications deletes a user's notification settings and
// notifications, as the user is deleted: a later account that happens to
// get the same ID must not inherit where they went.
func deleteNotifications(tx *gorm.DB, userID int64) error {
	if err := tx.Where("user_id = ?", userID).Delete(&NotificationSettings{}).Error; err != nil {
		return fmt.Errorf("delete notification settings of user %d: %w", userID, err)
	}
	if err := tx.Where("user_id = ?", userID).Delete(&Notification{}).Error; err != nil {
		return fmt.Errorf("delete notifications of user %d: %w", userID, err)
	}
	return nil
}

// PendingNotifications counts the notifications not yet delivered nor
// given up: the outbox's backlog.
func (s *Store) PendingNotifications(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&Notification{}).Where("state = ?", NotifyPending).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count pending notifications: %w", err)
	}
	return n, nil
}

// PruneNotifications deletes the notifications delivered, given up or
// dropped before before, and returns how many it deleted.
func (s *Store) PruneNotifications(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("state <> ? AND created_at < ?", NotifyPending, before).Delete(&Notification{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune notifications: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// EnqueueIdleNotification queues the warning that run of j is idle and
// will be reclaimed at reclaimAt, once per run, by each channel of j's
// owner and of each lead of j's team (enabled accounts), of those who
// chose EventIdle: a lead answers for the team's GPUs, and may keep the
// job alive or ask its owner. It returns how many it queued.
func (s *Store) EnqueueIdleNotification(ctx context.Context, j *Job, reclaimAt, now time.Time) (int, error) {
	owner, err := s.UserByName(ctx, j.User)
	if err != nil {
		return 0, fmt.Errorf("idle notification of job %d: %w", j.ID, err)
	}
	recipients := []User{*owner}
	if j.Team != "" {
		var leads []User
		err := s.db.WithContext(ctx).Where("role = ? AND team = ? AND disabled_at IS NULL AND id <> ?", RoleLead, j.Team, owner.ID).
			Order("id").Find(&leads).Error
		if err != nil {
			return 0, fmt.Errorf("idle notification of job %d: the leads of team %s: %w", j.ID, j.Team, err)
		}
		recipients = append(recipients, leads...)
	}
	type send struct {
		user     int64
		channels []string
		suffix   string // of the dedupe key: "" for the owner's
	}
	var sends []send
	for i, u := range recipients {
		n, err := s.NotificationSettings(ctx, u.ID)
		if err != nil {
			return 0, err
		}
		if !n.Wants(EventIdle) {
			continue
		}
		suffix := ""
		if i > 0 {
			suffix = fmt.Sprintf(":lead:%d", u.ID)
		}
		sends = append(sends, send{u.ID, n.channels(), suffix})
	}
	if len(sends) == 0 {
		return 0, nil
	}
	detail := "its GPUs are idle: it will be stopped at " + reclaimAt.UTC().Format(time.RFC3339) + " unless they work again or it is kept alive"
	queued := 0
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, sd := range sends {
			for _, ch := range sd.channels {
				added, err := insertNotification(tx, sd.user, j.ID, 0, EventIdle, ch, detail, now, fmt.Sprintf("idle:%d:%d:%s%s", j.ID, j.Run, ch, sd.suffix))
				if err != nil {
					return err
				}
				if added {
					queued++
				}
			}
		}
		return nil
	})
	return queued, err
}
