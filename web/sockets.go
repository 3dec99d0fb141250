package web

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/app"
)

// Live connections keep their rights only as long as their credential:
// every connection's session or token is checked again every
// SocketRecheck (at once when this server ends a credential or changes a
// user), and a connection whose credential ended (logout, revocation,
// expiry, password reset, a disabled or deleted account) is closed with
// closeCredentialEnded. A user whose role or team changed keeps the
// connection with the new rights: topics they may no longer see are
// unsubscribed, each with an error message saying so, and every delivery
// is judged by the user as last checked. No connection lives longer than
// SocketMaxAge: the client reconnects, authenticating anew.

// Close codes of the live stream (4000-4999 are the application's).
const (
	// closeCredentialEnded: the session or token the connection opened
	// with has ended; log in again, or use a valid token.
	closeCredentialEnded = 4401
	// closeMaxAge: the connection reached SocketMaxAge; reconnect.
	closeMaxAge = 4408
)

// Defaults of the live stream's limits (Config).
const (
	defaultSocketRecheck     = 2 * time.Second
	defaultSocketMaxAge      = time.Hour
	defaultMaxSocketsPerUser = 16
)

// watchSockets checks the clients' credentials and topics every
// SocketRecheck, and whenever the hub is poked, until ctx ends.
func (s *Server) watchSockets(ctx context.Context) {
	tick := time.NewTicker(s.cfg.SocketRecheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.hub.poked:
		}
		if err := s.recheckSockets(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("live stream: check credentials", "err", err)
		}
		if err := s.sessions.recheck(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("sessions: check credentials", "err", err)
		}
	}
}

// recheckSockets checks every client once: it closes those whose
// credential ended or that are too old, and prunes the topics the others
// may no longer see. When the store cannot answer it changes nothing:
// the connections are checked again on the next tick, and end at
// SocketMaxAge regardless.
func (s *Server) recheckSockets(ctx context.Context) error {
	clients := s.hub.all()
	if len(clients) == 0 {
		return nil
	}
	now := s.cfg.Now()
	creds := make([]credential, len(clients))
	for i, cl := range clients {
		creds[i] = cl.cred
	}
	users, err := s.credentialUsers(ctx, creds)
	if err != nil {
		return err
	}
	teams := make(map[int64]string) // job ID -> team, read once per pass
	for _, cl := range clients {
		if now.Sub(cl.opened) >= s.cfg.SocketMaxAge {
			cl.close(closeMaxAge, fmt.Sprintf("connections last at most %s: reconnect", s.cfg.SocketMaxAge))
			continue
		}
		u, ok := users[cl.cred]
		if !ok {
			cl.close(closeCredentialEnded, fmt.Sprintf("your %s has ended: log in again, or use a valid token", cl.cred.kind))
			continue
		}
		cl.user.Store(u)
		for _, t := range s.hub.topicsOf(cl) {
			err := s.mayFollow(ctx, u, t, teams)
			var refused errTopic
			if errors.As(err, &refused) {
				s.hub.unfollow(cl, t)
				cl.send(wsOut{Topic: t, Type: "error", Error: "unsubscribed: " + err.Error()})
				continue
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// credentialUsers returns the current user of each distinct credential
// of creds that is still valid: two queries for them all
// (app.App.CredentialHolders).
func (s *Server) credentialUsers(ctx context.Context, creds []credential) (map[credential]*app.User, error) {
	var sessions, tokens []string
	out := make(map[credential]*app.User)
	for _, cr := range creds {
		switch cr.kind {
		case credSession:
			sessions = append(sessions, cr.hash)
		case credToken:
			tokens = append(tokens, cr.hash)
		case credDevToken:
			if u, err := s.devTokenUser(ctx); err == nil {
				out[cr] = u
			}
		}
	}
	bySession, byToken, err := s.app.CredentialHolders(ctx, sessions, tokens)
	if err != nil {
		return nil, err
	}
	for kind, us := range map[credKind]map[string]*app.User{credSession: bySession, credToken: byToken} {
		for h, u := range us {
			out[credential{kind: kind, hash: h}] = u
		}
	}
	return out, nil
}

// mayFollow returns an errTopic when u may not follow topic, nil when u
// may, or another error when that cannot be told now. teams caches the
// teams of jobs across calls (app.App.MaySeeJob).
func (s *Server) mayFollow(ctx context.Context, u *app.User, topic string, teams map[int64]string) error {
	var err error
	switch {
	case topic == topicGPUs, topic == topicQueues, topic == topicJCT, strings.HasPrefix(topic, topicGPU):
		return nil // every user sees every GPU and the queues (as their role may)
	case strings.HasPrefix(topic, topicTeam):
		err = app.MaySeeTeam(u, strings.TrimPrefix(topic, topicTeam))
	default:
		id, ok := jobTopicID(topic)
		if !ok {
			return errTopic(fmt.Sprintf("unknown topic %q", topic))
		}
		err = s.app.MaySeeJob(ctx, u, id, teams)
	}
	return topicRefusal(err)
}

// topicRefusal is err, an action's, as an errTopic when the action
// refused what the topic names (it does not exist or the user may not
// see it).
func topicRefusal(err error) error {
	if app.KindOf(err) == app.NotFound {
		return errTopic(err.Error())
	}
	return err
}

// seeing returns those of clients whose user may see the jobs of team:
// the followers of a job or team topic, checked at each delivery.
func seeing(clients []*wsClient, team string) []*wsClient {
	out := clients[:0:0]
	for _, cl := range clients {
		if canSee(cl.viewer(), team) {
			out = append(out, cl)
		}
	}
	return out
}
