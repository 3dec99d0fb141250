package app

import (
	"context"
	"errors"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

// HealthStore is what the server's health checks and /metrics ask of
// the store.
type HealthStore interface {
	Ping(ctx context.Context) error
	CheckWrite(ctx context.Context, now time.Time) error
	Writes() map[string]int64
}

// Ping reports whether the store answers (liveness); its error is the
// store's, for the outage it tells.
func (s *App) Ping(ctx context.Context) error { return s.cfg.Store.Ping(ctx) }

// CheckWrite reports whether the store can save now (readiness).
func (s *App) CheckWrite(ctx context.Context) error { return s.cfg.Store.CheckWrite(ctx, s.cfg.Now()) }

// StoreWrites counts the rows the store wrote since it opened, by kind.
func (s *App) StoreWrites() map[string]int64 { return s.cfg.Store.Writes() }

// StoreCause names, in a few words, why err says the store cannot save
// now ("disk full", "database unreachable", ...); "" when it does not,
// and for an action's own refusal (an *Error not made from the store's),
// whatever it carries: a files helper's network error is no outage.
func StoreCause(err error) string {
	var e *Error
	if errors.As(err, &e) && !e.store {
		return ""
	}
	return models.Cause(err)
}

// StoreUnavailable reports whether err says the store cannot save now:
// the store's own error, bare or as an action's Unavailable refusal. An
// action's other Unavailable refusals (a machine not connected, a replay
// too long) say their own message.
func StoreUnavailable(err error) bool { return StoreCause(err) != "" }
