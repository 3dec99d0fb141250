package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/outbound"
)

// Config sets up a Notifier.
type Config struct {
	Store *models.Store
	// Leader reports whether this replica leads; only the leader
	// delivers. nil: always.
	Leader func() bool
	// PublicURL is the portal's address as users reach it, for links.
	PublicURL string
	// Mailer sends email; nil: email is off, and email notifications fail
	// saying so.
	Mailer *Mailer
	// WebhookTimeout bounds one webhook request; default 10s.
	WebhookTimeout time.Duration
	// Webhooks is where webhook requests may connect (serve
	// --webhook-allow, with the server's own addresses); nil: the
	// Internet's addresses only.
	Webhooks *outbound.Policy
	// RetryBase is the wait after a first failure, doubled after each
	// next one up to RetryMax; defaults 30s and 1h.
	RetryBase, RetryMax time.Duration
	// Poll is how often the outbox is read; default 1s. HeldEvery is how
	// often waiting jobs are checked for the held event; default 30s.
	Poll, HeldEvery time.Duration
	// Workers is how many notifications are delivered at once; default 8.
	Workers int
	Logger  *slog.Logger
	Now     func() time.Time
}

// Keep is how long delivered, given-up and dropped notifications stay
// in the outbox for users to see.
const Keep = 30 * 24 * time.Hour

// Notifier delivers the outbox.
type Notifier struct {
	cfg     Config
	webhook *Webhook
	// wake asks for a read of the outbox before the next poll.
	wake chan struct{}
	// attempts counts attempts by channel and outcome.
	attempts *prometheus.CounterVec
}

// New makes a Notifier; Run starts it.
func New(cfg Config) (*Notifier, error) {
	if cfg.Store == nil {
		return nil, errors.New("notify: a store is required")
	}
	if cfg.Mailer != nil {
		if err := CheckMailer(cfg.Mailer); err != nil {
			return nil, err
		}
	}
	if cfg.Leader == nil {
		cfg.Leader = func() bool { return true }
	}
	if cfg.WebhookTimeout <= 0 {
		cfg.WebhookTimeout = 10 * time.Second
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 30 * time.Second
	}
	if cfg.RetryMax < cfg.RetryBase {
		cfg.RetryMax = max(time.Hour, cfg.RetryBase)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.HeldEvery <= 0 {
		cfg.HeldEvery = 30 * time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpuportal_notification_attempts_total",
		Help: "Notification deliveries this replica attempted, by channel and outcome (sent, failed: to be retried, gave_up, dropped).",
	}, []string{"channel", "outcome"})
	return &Notifier{cfg: cfg, webhook: NewWebhook(cfg.WebhookTimeout, cfg.Webhooks), wake: make(chan struct{}, 1), attempts: attempts}, nil
}

// Collectors are the notifier's metrics: its attempts, and the outbox's
// backlog (gpuportal_notifications_pending).
func (n *Notifier) Collectors() []prometheus.Collector {
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gpuportal_notifications_pending",
		Help: "Notifications waiting for delivery (or for their next try).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		k, err := n.cfg.Store.PendingNotifications(ctx)
		if err != nil {
			return -1
		}
		return float64(k)
	})
	return []prometheus.Collector{n.attempts, pending}
}

// Wake makes the notifier read the outbox now rather than at its next poll.
func (n *Notifier) Wake() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// lease is how long a claimed notification is left alone: longer than
// any attempt takes.
func (n *Notifier) lease() time.Duration {
	mailT := 30 * time.Second
	if n.cfg.Mailer != nil && n.cfg.Mailer.Timeout > 0 {
		mailT = n.cfg.Mailer.Timeout
	}
	return 2*max(mailT, n.cfg.WebhookTimeout) + time.Minute
}

// Run delivers notifications while this replica leads, until ctx ends;
// it waits for the deliveries under way before it returns.
func (n *Notifier) Run(ctx context.Context) {
	log := n.cfg.Logger
	slots := make(chan struct{}, n.cfg.Workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(n.cfg.Poll)
	defer t.Stop()
	var lastHeld time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.wake:
		}
		if !n.cfg.Leader() {
			continue
		}
		now := n.cfg.Now()
		if now.Sub(lastHeld) >= n.cfg.HeldEvery {
			lastHeld = now
			if k, err := n.cfg.Store.EnqueueHeldNotifications(ctx, now); err != nil {
				log.Warn("notify: check waiting jobs", "err", err)
			} else if k > 0 {
				log.Info("notify: queued held notifications", "count", k)
			} else {
				log.Debug("notify: checked waiting jobs: none newly held")
			}
			if k, err := n.cfg.Store.PruneNotifications(ctx, now.Add(-Keep)); err != nil {
				log.Warn("notify: prune the outbox", "err", err)
			} else if k > 0 {
				log.Debug("notify: pruned old notifications", "count", k)
			}
		}
		free := cap(slots) - len(slots)
		if free == 0 {
			continue
		}
		due, err := n.cfg.Store.ClaimNotifications(ctx, now, n.lease(), free)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("notify: read the outbox", "err", err)
			}
			continue
		}
		for i := range due {
			slots <- struct{}{}
			wg.Add(1)
			go func(nt models.Notification) {
				defer func() { <-slots; wg.Done() }()
				n.deliver(ctx, &nt)
			}(due[i])
		}
	}
}

// deliver makes one attempt at nt and records its outcome.
func (n *Notifier) deliver(ctx context.Context, nt *models.Notification) {
	log := n.cfg.Logger.With("notification", nt.ID, "user_id", nt.UserID, "channel", nt.Channel, "event", nt.Event, "job", nt.JobID)
	// Outcomes are recorded even as the server stops.
	rec := context.WithoutCancel(ctx)
	err := n.attempt(ctx, nt)
	var drop *dropError
	switch {
	case err == nil:
		n.attempts.WithLabelValues(nt.Channel, "sent").Inc()
		if err := n.cfg.Store.NotificationSent(rec, nt.ID, n.cfg.Now()); err != nil {
			log.Warn("notify: record delivery", "err", err)
		}
		log.Debug("notify: delivered")
	case errors.As(err, &drop):
		n.attempts.WithLabelValues(nt.Channel, "dropped").Inc()
		if err := n.cfg.Store.DropNotification(rec, nt.ID, drop.why); err != nil {
			log.Warn("notify: drop", "err", err)
		}
	default:
		attempts := nt.Attempts + 1
		var retry *time.Time
		outcome := "gave_up"
		if attempts < models.MaxNotifyAttempts {
			at := n.cfg.Now().Add(Backoff(attempts, n.cfg.RetryBase, n.cfg.RetryMax))
			retry, outcome = &at, "failed"
		}
		n.attempts.WithLabelValues(nt.Channel, outcome).Inc()
		// The user's log shows err; the operator's also its cause.
		log.Warn("notify: delivery failed", "attempt", attempts, "err", err, "cause", errors.Unwrap(err), "retry_at", retry)
		if err := n.cfg.Store.NotificationFailed(rec, nt.ID, err.Error(), retry); err != nil {
			log.Warn("notify: record failure", "err", err)
		}
	}
}

// dropError gives a notification up without counting an attempt.
type dropError struct{ why string }

func (e *dropError) Error() string { return e.why }

// attempt sends nt by its channel.
func (n *Notifier) attempt(ctx context.Context, nt *models.Notification) error {
	set, err := n.cfg.Store.NotificationSettings(ctx, nt.UserID)
	if err != nil {
		return err
	}
	u, err := n.cfg.Store.UserByID(ctx, nt.UserID)
	if errors.Is(err, models.ErrNotFound) {
		return &dropError{"the user is gone"}
	}
	if err != nil {
		return err
	}
	var j *models.Job
	if nt.JobID != 0 {
		j, err = n.cfg.Store.Job(ctx, nt.JobID)
		if err != nil && !errors.Is(err, models.ErrNotFound) {
			return err
		}
	}
	m := NewMessage(nt, j, u.Name, n.cfg.PublicURL, set.HeldAfterHours)
	switch nt.Channel {
	case models.ChannelEmail:
		if set.Email == "" {
			return &dropError{"email was turned off before delivery"}
		}
		if n.cfg.Mailer == nil {
			return errors.New("this server sends no email: its operator has not configured SMTP (serve --smtp-addr)")
		}
		return n.cfg.Mailer.Send(ctx, set.Email, m.Subject, m.Email())
	case models.ChannelWebhook:
		if set.WebhookURL == "" {
			return &dropError{"the webhook was turned off before delivery"}
		}
		return n.webhook.Post(ctx, set.WebhookURL, set.WebhookSecret, nt.ID, n.cfg.Now(), m.Payload())
	}
	return &dropError{fmt.Sprintf("unknown channel %q", nt.Channel)}
}
