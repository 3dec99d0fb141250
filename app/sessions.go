package app

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// Interactive sessions (docs/portal.md, "Interactive sessions"): who may
// open one (its owner, or an admin, audited), what the portal's proxy
// needs to reach it, and when a proxied request must end.

// SessionStore is what the actions on sessions read.
type SessionStore interface {
	// SessionPrefix is the path a session is served under, its URL
	// secret in it.
	SessionPrefix(j *models.Job) string
	// SessionToken is the credential the proxy presents to a session.
	SessionToken(j *models.Job) string
	UserSessions(ctx context.Context, user string, limit int) ([]models.Job, error)
}

// CanOpenSession reports whether u may open j's session: its owner or an
// admin. A team lead sees the job, not into it.
func CanOpenSession(u *User, j *Job) bool { return mayOpenSession(u, &j.row) }

// mayOpenSession is CanOpenSession for a row.
func mayOpenSession(u *User, j *models.Job) bool {
	return u != nil && (u.Name == j.User || u.Role == RoleAdmin)
}

// SessionURL is the address of j's session for u: empty for a batch job,
// and for a user who may not open it.
func (s *App) SessionURL(u *User, j *Job) string {
	if !j.IsSession() || !CanOpenSession(u, j) {
		return ""
	}
	return s.cfg.Store.SessionPrefix(&j.row)
}

// UserSessions lists a's own interactive sessions, newest first, at most
// limit of them.
func (s *App) UserSessions(ctx context.Context, a Actor, limit int) ([]Job, error) {
	js, err := s.cfg.Store.UserSessions(ctx, a.User.Name, limit)
	return jobViews(js), stored(err)
}

// Session is a session an actor may open, with what the proxy needs.
type Session struct {
	Job *Job
	// Prefix is the path the portal serves it under.
	Prefix string
	// Token is the credential the proxy presents to the session in
	// place of the portal's; never shown to anyone.
	Token string
}

// SessionAuditEvery is how often an admin's use of another's session is
// recorded in the audit log: once per admin and job in this time, not
// once per request.
const SessionAuditEvery = 10 * time.Minute

// SessionOpener opens sessions for the portal's proxy; it remembers when
// it last recorded each admin's use of each session of another's.
type SessionOpener struct {
	app *App

	mu      sync.Mutex
	audited map[string]time.Time // admin and job -> when last recorded
}

// SessionOpener returns a new SessionOpener.
func (s *App) SessionOpener() *SessionOpener {
	return &SessionOpener{app: s, audited: make(map[string]time.Time)}
}

// noSession is the one answer for a job that does not exist, is no
// session, or whose secret is wrong: the secret proves nothing, but
// reveals nothing either.
var noSession = &Error{Kind: NotFound, Msg: "no such session"}

// Open returns the session of job id whose URL secret is secret, once a
// may open it; an admin's opening of another's session is audited.
func (o *SessionOpener) Open(ctx context.Context, a Actor, id int64, secret string) (*Session, error) {
	s := o.app
	j, err := s.cfg.Store.Job(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, noSession
	}
	if err != nil {
		return nil, stored(err)
	}
	prefix := s.cfg.Store.SessionPrefix(j)
	if !j.IsSession() || subtle.ConstantTimeCompare([]byte(prefix), []byte(models.SessionPath(j.ID, secret))) != 1 {
		return nil, noSession
	}
	if !mayOpenSession(a.User, j) {
		s.cfg.Logger.Warn("session refused", "job", j.ID, "owner", j.User, "user", a.User.Name, "from", a.From)
		return nil, forbidden("the session of job %d is %s's: only its owner (or an admin) may open it", j.ID, j.User)
	}
	if a.User.Name != j.User {
		if err := o.audit(ctx, a, j); err != nil {
			return nil, err
		}
	}
	return &Session{Job: jobView(j), Prefix: prefix, Token: s.cfg.Store.SessionToken(j)}, nil
}

// audit records an admin's opening of another's session, once per
// SessionAuditEvery per admin and job.
func (o *SessionOpener) audit(ctx context.Context, a Actor, j *models.Job) error {
	key := a.User.Name + "\x00" + strconv.FormatInt(j.ID, 10)
	now := o.app.cfg.Now()
	o.mu.Lock()
	last, ok := o.audited[key]
	if ok && now.Sub(last) < SessionAuditEvery {
		o.mu.Unlock()
		return nil
	}
	o.audited[key] = now
	for k, t := range o.audited {
		if now.Sub(t) >= SessionAuditEvery {
			delete(o.audited, k)
		}
	}
	o.mu.Unlock()
	return o.app.audit(ctx, a, "session.open", fmt.Sprintf("job %d of %s", j.ID, j.User), j.SessionType)
}

// SessionEnded says why a request u proxies to run `run` of job id's
// session must end now: u may no longer open it, or the run ended; ""
// while it may go on. jobs caches the jobs read across calls (nil: job
// id is gone).
func (s *App) SessionEnded(ctx context.Context, u *User, id, run int64, jobs map[int64]*Job) (string, error) {
	j, seen := jobs[id]
	if !seen {
		r, err := s.cfg.Store.Job(ctx, id)
		if err != nil && !errors.Is(err, models.ErrNotFound) {
			return "", err
		}
		if r != nil {
			j = jobView(r)
		}
		jobs[id] = j
	}
	switch {
	case j == nil || !CanOpenSession(u, j):
		return u.Name + " may no longer open it", nil
	case j.State != job.Running || j.Run != run:
		return "its run ended", nil
	}
	return "", nil
}

// sessionDialer is a machine whose sessions the portal can reach:
// *agent.Local (in process) and the hub's remote machines (a tunnel).
type sessionDialer interface {
	DialSession(ctx context.Context, ref job.RunRef) (net.Conn, error)
}

// DialSession reaches run ref's session on machine node through its
// agent.
func (s *App) DialSession(ctx context.Context, node string, ref job.RunRef) (net.Conn, error) {
	for _, n := range s.cfg.Engine.Nodes() {
		if n.Name() != node {
			continue
		}
		d, ok := n.(sessionDialer)
		if !ok {
			return nil, fmt.Errorf("machine %s cannot reach sessions (its agent is too old, or it is a monitor)", node)
		}
		return d.DialSession(ctx, ref)
	}
	hint := ""
	if s.cfg.Leader != nil && !s.cfg.Leader() {
		hint = " (this replica is a follower: sessions are reached through the leader)"
	}
	return nil, fmt.Errorf("machine %s is not connected to this server%s", node, hint)
}
