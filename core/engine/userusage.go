package engine

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// UserUsage is a user's decayed usage within a team as the store keeps it.
type UserUsage struct {
	Team, User      string
	UsageGPUSeconds float64 // decayed usage as of UsageAt
	UsageAt         time.Time
}

// UserUsageStore is the part of Store that fair share inside a team reads
// and records through. With no usage kept, users of a team start even.
type UserUsageStore interface {
	// UserUsages returns each team's users' decayed usage as last saved.
	UserUsages(ctx context.Context) ([]UserUsage, error)
	// SetUserUsage saves each user's decayed usage as of at.
	SetUserUsage(ctx context.Context, usage []UserUsage, at time.Time) error
}

// loadUserUsage starts the account of users' usage from what the store
// kept, decayed to now.
func (e *Engine) loadUserUsage(ctx context.Context, now time.Time) error {
	st := &e.teamState
	st.users = map[string]map[string]float64{}
	rows, err := e.cfg.Store.UserUsages(ctx)
	if err != nil {
		return fmt.Errorf("read users' usage: %w", err)
	}
	for _, r := range rows {
		st.user(r.Team)[r.User] = sched.DecayUsage(r.UsageGPUSeconds, now.Sub(r.UsageAt).Seconds(), e.halfLifeS(), 0)
	}
	return nil
}

// user returns team's users' usage, made on first use.
func (st *teamState) user(team string) map[string]float64 {
	m := st.users[team]
	if m == nil {
		m = map[string]float64{}
		st.users[team] = m
	}
	return m
}

// addUserUsage decays every user's usage over dt seconds, counting the
// GPUs each user's running jobs held (a shared GPU by the job's share).
func (e *Engine) addUserUsage(jobs []Job, held usage.Figures, dt float64) {
	st := &e.teamState
	used := map[[2]string]float64{}
	for i := range jobs {
		if j := &jobs[i]; j.State == job.Running {
			used[[2]string{j.Team, j.User}] += held.Held(j.ID) * dt
		}
	}
	for k := range used {
		st.user(k[0]) // a user's first usage
		if _, ok := st.users[k[0]][k[1]]; !ok {
			st.users[k[0]][k[1]] = 0
		}
	}
	for team, m := range st.users {
		for user, u := range m {
			m[user] = sched.DecayUsage(u, dt, e.halfLifeS(), used[[2]string{team, user}])
		}
	}
}

// saveUserUsage records users' usage as of now.
func (e *Engine) saveUserUsage(ctx context.Context, now time.Time) error {
	var rows []UserUsage
	for team, m := range e.teamState.users {
		for user, u := range m {
			rows = append(rows, UserUsage{Team: team, User: user, UsageGPUSeconds: u, UsageAt: now})
		}
	}
	if err := e.cfg.Store.SetUserUsage(ctx, rows, now); err != nil {
		return fmt.Errorf("save users' usage: %w", err)
	}
	return nil
}

// recordUserShares keeps where each team's users stood after a pass.
func (e *Engine) recordUserShares(snap sched.Snapshot) {
	out := make(map[string][]sched.UserShare, len(snap.Teams))
	for _, t := range snap.Teams {
		out[t.Name] = sched.UserShares(t, snap.Jobs)
	}
	e.shareMu.Lock()
	e.userShares = out
	e.shareMu.Unlock()
}

// UserShares returns where each user of team stood at the last pass, by
// name: their decayed usage within the team and their equal split of its
// guarantee.
func (e *Engine) UserShares(team string) []sched.UserShare {
	e.shareMu.Lock()
	defer e.shareMu.Unlock()
	out := append([]sched.UserShare(nil), e.userShares[team]...)
	sort.Slice(out, func(a, b int) bool { return out[a].User < out[b].User })
	return out
}
