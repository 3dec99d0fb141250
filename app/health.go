package app

import (
	"context"
	"time"
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
