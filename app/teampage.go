package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
)

// A team's page: its members with their caps and usage, and where the
// team stood over time. Its members and admins see it; a lead sets its
// policies (teams.go).

// TeamPageStore is what a team's page reads.
type TeamPageStore interface {
	UserCaps(ctx context.Context) (map[string]map[string]int, error)
	MemberUsage(ctx context.Context, team string, since time.Time) (map[string]float64, error)
	TeamSamples(ctx context.Context, team string, since time.Time) ([]models.TeamSample, error)
}

// TeamMembers is team's page as the store has it, for a member of team
// or an admin: its members with their caps and the GPU-seconds of their
// runs that ended, of jobs submitted since since (the runs in progress
// are the caller's to add), and the team's samples since since. A team
// that does not exist is NotFound; another team's, Forbidden.
func (s *App) TeamMembers(ctx context.Context, a Actor, team string, since time.Time) (api.Team, error) {
	out := api.Team{Members: []api.Member{}, Samples: []api.TeamSample{}}
	if err := active(a); err != nil {
		return out, err
	}
	if _, err := s.cfg.Store.Team(ctx, team); errors.Is(err, models.ErrNotFound) {
		return out, &Error{Kind: NotFound, Msg: fmt.Sprintf("no team %q", team), Err: err}
	} else if err != nil {
		return out, stored(err)
	}
	if !CanSee(a.User, team) {
		return out, forbidden("only members of %s and admins may see its page", team)
	}
	caps, err := s.cfg.Store.UserCaps(ctx)
	if err != nil {
		return out, stored(err)
	}
	out.Caps = caps[team]
	if out.Caps == nil {
		out.Caps = map[string]int{}
	}
	usage, err := s.cfg.Store.MemberUsage(ctx, team, since)
	if err != nil {
		return out, stored(err)
	}
	users, err := s.cfg.Store.Users(ctx)
	if err != nil {
		return out, stored(err)
	}
	for _, u := range users {
		if u.Team == team {
			out.Members = append(out.Members, api.Member{User: u.Name, Role: string(u.Role), UsageGPUSeconds: usage[u.Name], MaxGPUs: out.Caps[u.Name]})
		}
	}
	samples, err := s.cfg.Store.TeamSamples(ctx, team, since)
	if err != nil {
		return out, stored(err)
	}
	for _, sm := range samples {
		out.Samples = append(out.Samples, api.TeamSample{At: sm.At, InUseGPUs: sm.InUseGPUs, BorrowedGPUs: sm.BorrowedGPUs, GuaranteeGPUs: sm.GuaranteeGPUs})
	}
	return out, nil
}

// Stranded is a waiting job that needs more GPUs than its user's cap
// allows: it cannot start until the cap is raised.
type Stranded struct {
	ID         int64
	Name, User string
	GPUs, Cap  int
	// OwnCap: the cap is the user's own, not the team's per user.
	OwnCap bool
}

// StrandedJobs are the waiting jobs of team at m that need more GPUs
// than their user's cap (sched.Team.CapOf), for an actor who may see
// team.
func (s *App) StrandedJobs(ctx context.Context, a Actor, m *Moment, team string) ([]Stranded, error) {
	if !CanSee(a.User, team) {
		return nil, forbidden("only members of %s and admins may see its page", team)
	}
	i := slices.IndexFunc(m.teams, func(t models.Team) bool { return t.Name == team })
	if i < 0 {
		return nil, nil
	}
	caps, err := s.cfg.Store.UserCaps(ctx)
	if err != nil {
		return nil, stored(err)
	}
	t := sched.Team{Name: team, MaxGPUsPerUser: m.teams[i].MaxGPUsPerUser, UserCaps: caps[team]}
	var out []Stranded
	for k := range m.queued {
		j := &m.queued[k]
		if j.Team != team || !j.State.Waiting() {
			continue
		}
		c := t.CapOf(j.User)
		if c <= 0 || j.GPUs <= c {
			continue
		}
		out = append(out, Stranded{ID: j.ID, Name: j.Name, User: j.User, GPUs: j.GPUs, Cap: c, OwnCap: caps[team][j.User] > 0})
	}
	return out, nil
}

// MemberShares are the fair-share figures of team's members at the
// engine's last pass, by user, for a lead of team or an admin; nil for
// anyone else.
func (s *App) MemberShares(a Actor, team string) map[string]api.MemberShare {
	if !CanLead(a.User, team) {
		return nil
	}
	out := map[string]api.MemberShare{}
	for _, us := range s.cfg.Engine.UserShares(team) {
		out[us.User] = api.MemberShare{User: us.User, UsageGPUSeconds: us.UsageGPUSeconds, ShareGPUs: us.ShareGPUs,
			UsageShare: us.UsageShare, Factor: us.Factor}
	}
	return out
}
