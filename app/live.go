package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

// What the live screens read (the live stream's topics, sessions, the
// cluster, /metrics, health), and who may see which of it.

// LiveStore is what the live screens read; app.Store embeds it.
type LiveStore interface {
	SessionStore
	HolderStore
	ClusterStore
	HealthStore
	TemplateStore
	JobsByID(ctx context.Context, ids []int64) ([]models.Job, error)
}

// HolderStore tells who holds login sessions and API tokens now.
type HolderStore interface {
	SessionUsers(ctx context.Context, hashes []string, now time.Time) (map[string]models.User, error)
	TokenUsers(ctx context.Context, hashes []string, now time.Time) (map[string]models.User, error)
}

// CredentialHolders returns the users of the login sessions and of the
// API tokens (each by its hash) that are still valid now, as they are
// now: two queries for them all. A live connection lasts only while its
// credential does.
func (s *App) CredentialHolders(ctx context.Context, sessions, tokens []string) (bySession, byToken map[string]*User, err error) {
	now := s.cfg.Now()
	var rows map[string]models.User
	if len(sessions) > 0 {
		if rows, err = s.cfg.Store.SessionUsers(ctx, sessions, now); err != nil {
			return nil, nil, stored(err)
		}
		bySession = userViews(rows)
	}
	if len(tokens) > 0 {
		if rows, err = s.cfg.Store.TokenUsers(ctx, tokens, now); err != nil {
			return nil, nil, stored(err)
		}
		byToken = userViews(rows)
	}
	return bySession, byToken, nil
}

// usersOf is the views of rows, by the same keys.
func userViews(rows map[string]models.User) map[string]*User {
	out := make(map[string]*User, len(rows))
	for k, u := range rows {
		out[k] = userView(&u)
	}
	return out
}

// MaySeeJob returns nil when u may see job id, a NotFound *Error when
// the job does not exist or u may not see it (the same answer, so that
// job IDs of other teams cannot be probed), or another error when that
// cannot be told now. teams caches the teams of jobs across calls: one
// read per job however many users ask (the live stream's recheck of its
// followers).
func (s *App) MaySeeJob(ctx context.Context, u *User, id int64, teams map[int64]string) error {
	team, ok := teams[id]
	if !ok {
		j, err := s.cfg.Store.Job(ctx, id)
		if errors.Is(err, models.ErrNotFound) {
			return &Error{Kind: NotFound, Msg: fmt.Sprintf("no job %d that you may see", id)}
		}
		if err != nil {
			return stored(err)
		}
		team, teams[id] = j.Team, j.Team
	}
	if !CanSee(u, team) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("no job %d that you may see", id)}
	}
	return nil
}

// FollowedJob returns job id for a to follow live, if a may see it; one
// of a team a may not see is one that does not exist.
func (s *App) FollowedJob(ctx context.Context, a Actor, id int64) (*Job, error) {
	j, err := s.cfg.Store.Job(ctx, id)
	if errors.Is(err, models.ErrNotFound) || (err == nil && !CanSee(a.User, j.Team)) {
		return nil, &Error{Kind: NotFound, Msg: fmt.Sprintf("no job %d that you may see", id)}
	}
	if err != nil {
		return nil, stored(err)
	}
	return jobView(j), nil
}

// MaySeeTeam returns nil when u may see team name (its members and
// admins), else a NotFound *Error: a team that does not exist gets the
// same answer, so that team names cannot be probed.
func MaySeeTeam(u *User, name string) error {
	if !CanSee(u, name) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("no team %q that you may see", name)}
	}
	return nil
}

// FollowedJobs returns those of the jobs ids that exist, in the order of
// ids, for the live stream: it sends each only to the followers who may
// see it (CanSee, checked at each delivery).
func (s *App) FollowedJobs(ctx context.Context, ids []int64) ([]Job, error) {
	js, err := s.cfg.Store.JobsByID(ctx, ids)
	return jobViews(js), stored(err)
}

// TeamJobs returns those of the jobs ids that exist and are team's, in
// the order of ids, if a may see the team: with the fields a queue's
// entry shows (Moment.QueueJob) alone, the others zero.
func (s *App) TeamJobs(ctx context.Context, a Actor, team string, ids []int64) ([]Job, error) {
	if err := MaySeeTeam(a.User, team); err != nil {
		return nil, err
	}
	js, err := s.cfg.Store.QueueJobsByID(ctx, ids)
	if err != nil {
		return nil, stored(err)
	}
	out := js[:0]
	for _, j := range js {
		if j.Team == team {
			out = append(out, j)
		}
	}
	return jobViews(out), nil
}
