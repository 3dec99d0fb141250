package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/models"
)

// The server rides out a database outage (docs/operations.md): what it
// can still answer (from memory: machines, GPUs, the live stream) it
// answers with the age of what it knows, and what needs the database it
// refuses with 503, naming the cause and since when, rather than a bare
// error. The server learns of the outage from a ping every dbCheckEvery
// and from every request the database failed.

const (
	dbCheckEvery   = time.Second
	dbCheckTimeout = 2 * time.Second
	// dataAgeHeader carries, while the database is out, how old in
	// seconds the data of an answer may be: the time since the database
	// last answered.
	dataAgeHeader = "X-Data-Age"
	// outageKey holds the outage's banner in a request's context (page).
	outageKey = "gpuportal.outage"
)

// dbState is what this server knows of its database's reachability.
type dbState struct {
	mu        sync.Mutex
	lastOK    time.Time // the last time the database answered
	downSince time.Time // zero while it answers
}

// observe takes the outcome of one exchange with the database at now:
// nil, or an error; only an unreachable database counts as down.
func (d *dbState) observe(err error, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err == nil:
		d.lastOK, d.downSince = now, time.Time{}
	case models.Cause(err) == "database unreachable" && d.downSince.IsZero():
		d.downSince = now
		if d.lastOK.IsZero() || d.lastOK.After(now) {
			d.lastOK = now
		}
	}
}

// outage says whether the database is out, since when, and when it last
// answered.
func (d *dbState) outage() (down bool, since, lastOK time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.downSince.IsZero(), d.downSince, d.lastOK
}

// watchDatabase pings the database every dbCheckEvery until ctx ends.
func (s *Server) watchDatabase(ctx context.Context) {
	t := time.NewTicker(dbCheckEvery)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, dbCheckTimeout)
		err := s.app.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		wasDown, since, _ := s.db.outage()
		s.db.observe(err, s.cfg.Now())
		if down, _, _ := s.db.outage(); down != wasDown {
			if down {
				s.cfg.Logger.Warn("the database is unreachable: submissions are refused with 503, answers carry "+dataAgeHeader, "err", err)
			} else {
				s.cfg.Logger.Info("the database answers again", "out_for", s.cfg.Now().Sub(since).Round(time.Millisecond))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// unreachableSince is the cause of an outage in a few words:
// "database unreachable since 15:04:05"; "" when the database answers.
func (s *Server) unreachableSince() string {
	down, since, _ := s.db.outage()
	if !down {
		return ""
	}
	return "database unreachable since " + since.Format("15:04:05")
}

// outageRefusal is what a request refused for the outage says.
func (s *Server) outageRefusal() string {
	_, since, _ := s.db.outage()
	return fmt.Sprintf("The database is unreachable since %s (%s ago): nothing was changed. Try again when it is back; running jobs go on meanwhile.",
		since.Format("15:04:05"), s.cfg.Now().Sub(since).Round(time.Second))
}

// dataAge marks every answer given while the database is out with the
// age of its data (X-Data-Age, seconds), and gives pages a banner that
// says so (page).
func (s *Server) dataAge(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if down, since, lastOK := s.db.outage(); down {
			age := max(0, s.cfg.Now().Sub(lastOK))
			c.Response().Header().Set(dataAgeHeader, strconv.Itoa(int(age.Seconds())))
			c.Set(outageKey, fmt.Sprintf("The database is unreachable since %s: what this page shows is data as of %s ago, and nothing can be saved until it is back. Running jobs go on.",
				since.Format("15:04:05"), age.Round(time.Second)))
		}
		return next(c)
	}
}

// refuseForOutage answers a request the database failed, while it is
// out: 503 with the cause and since when. It reports whether it did.
func (s *Server) refuseForOutage(err error, c echo.Context) (int, string, bool) {
	if models.Cause(err) != "database unreachable" {
		return 0, "", false
	}
	s.db.observe(err, s.cfg.Now())
	c.Response().Header().Set("Retry-After", "5")
	return http.StatusServiceUnavailable, s.outageRefusal(), true
}
