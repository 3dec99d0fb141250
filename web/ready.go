package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/models"
)

// Readiness tells whether this server can do its work now, not only
// whether it runs: the store must take a write, and the data folder
// (job output, and with SQLite the database) a file. Probes write, so
// a result is kept for readyFor and shared by the callers meanwhile.

const (
	readyFor     = time.Second
	readyTimeout = 3 * time.Second
)

// readiness caches the last probe.
type readiness struct {
	mu    sync.Mutex
	at    time.Time
	cause string // "" when ready
}

// ready probes the store and the data folder, at most once per readyFor,
// and returns "" or why the server cannot save, in a few words.
func (s *Server) ready(ctx context.Context) string {
	if cause := s.unreachableSince(); cause != "" {
		return cause // known now, whatever the last probe found
	}
	s.readiness.mu.Lock()
	defer s.readiness.mu.Unlock()
	now := time.Now()
	if !s.readiness.at.IsZero() && now.Sub(s.readiness.at) < readyFor {
		return s.readiness.cause
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
	defer cancel()
	cause := ""
	if err := s.app.CheckWrite(ctx); err != nil {
		cause = "database: " + causeOf(err)
		s.db.observe(err, s.cfg.Now())
		if since := s.unreachableSince(); since != "" {
			cause = since
		}
		s.cfg.Logger.Warn("not ready: the store cannot save", "err", err)
	} else if err := probeDir(s.cfg.DataDir); err != nil {
		cause = "data folder: " + causeOf(err)
		s.cfg.Logger.Warn("not ready: the data folder cannot be written", "err", err)
	}
	s.readiness.at, s.readiness.cause = time.Now(), cause
	return cause
}

// causeOf is why err keeps the server from saving, in a few words.
func causeOf(err error) string {
	if c := models.Cause(err); c != "" {
		return c
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer within " + readyTimeout.String()
	}
	return "cannot write"
}

// probeDir writes a file of a few pages to dir, syncs it and removes it;
// "" dir is not checked.
func probeDir(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".ready-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, 16<<10))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, ".ready-*"), err)
	}
	return nil
}

// readyz answers 200 when the server can save, else 503 with the cause:
// for load balancers and monitors (/healthz only says it runs).
func (s *Server) readyz(c echo.Context) error {
	if cause := s.ready(c.Request().Context()); cause != "" {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "not ready", "cause": cause, "role": s.role()})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready", "role": s.role()})
}

// cannotSave is what a user reads when the store cannot save.
const cannotSave = "The server cannot save right now (its storage is full or unreachable): nothing was changed. Try again in a few minutes; the admins are told."
