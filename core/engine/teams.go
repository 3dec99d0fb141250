package engine

import (
	"context"
	"maps"
	"sort"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// Team is a team's share as the engine reads it from the store.
type Team struct {
	Name            string
	GuaranteeGPUs   int
	Weight          float64
	MaxGPUsPerUser  int
	UserCaps        map[string]int
	UsageGPUSeconds float64   // decayed usage as of UsageAt
	UsageAt         time.Time // zero: never recorded
	// SessionPriorityGPUs is how many GPUs the team's sessions may hold
	// with interactive priority (sched.Team.InteractiveGPUs).
	SessionPriorityGPUs int
}

// TeamSample is where a team stood at one time. InUseGPUs and
// BorrowedGPUs count a shared GPU by the share each job holds of it
// (core/usage), as the portal does.
type TeamSample struct {
	Team          string
	At            time.Time
	InUseGPUs     float64
	BorrowedGPUs  float64
	GuaranteeGPUs int
}

// TeamStore is the part of Store that fair share reads and records
// through; with no teams, fair share is off.
type TeamStore interface {
	// EngineTeams returns the teams with their guarantees, caps and
	// decayed usage as last saved.
	EngineTeams(ctx context.Context) ([]Team, error)
	// SetTeamUsage saves each team's decayed usage as of at.
	SetTeamUsage(ctx context.Context, usage map[string]float64, at time.Time) error
	// RecordTeamSamples records where each team stood, for the usage
	// charts.
	RecordTeamSamples(ctx context.Context, samples []TeamSample) error
}

// How often team usage is saved and team samples are recorded.
const (
	usageSaveEvery  = 30 * time.Second
	teamSampleEvery = time.Minute
)

// teamState is the engine's running account of team usage.
type teamState struct {
	usage     map[string]float64            // decayed GPU-seconds, as of at
	users     map[string]map[string]float64 // team -> user -> decayed GPU-seconds, as of at
	at        time.Time
	savedAt   time.Time
	sampledAt time.Time
	// runs are the jobs running when the last pass began, for the samples.
	runs []usage.Run
}

// teams reads the teams, brings their decayed usage up to now (counting
// the GPUs their jobs held since the last pass) and returns them as the
// scheduler takes them. Without teams, fair share is off.
func (e *Engine) teams(ctx context.Context, jobs []Job, now time.Time) ([]sched.Team, error) {
	teams, err := e.cfg.Store.EngineTeams(ctx)
	if err != nil {
		return nil, err
	}
	st := &e.teamState
	if st.usage == nil {
		// First pass: start from what the store kept, decayed to now.
		st.usage = make(map[string]float64)
		for _, t := range teams {
			if !t.UsageAt.IsZero() {
				st.usage[t.Name] = sched.DecayUsage(t.UsageGPUSeconds, now.Sub(t.UsageAt).Seconds(), e.halfLifeS(), 0)
			}
		}
		st.at, st.savedAt, st.sampledAt = now, now, now
		if err := e.loadUserUsage(ctx, now); err != nil {
			return nil, err
		}
	}
	st.runs = st.runs[:0]
	for i := range jobs {
		if j := &jobs[i]; j.State == job.Running {
			st.runs = append(st.runs, usageRun(j))
		}
	}
	// A team uses the GPUs it holds, a shared GPU by its jobs' shares, as
	// the portal shows them (core/usage).
	held := usage.Of(st.runs, nil)
	if dt := now.Sub(st.at).Seconds(); dt > 0 {
		for _, t := range teams {
			st.usage[t.Name] = sched.DecayUsage(st.usage[t.Name], dt, e.halfLifeS(), held.Team(t.Name).InUseGPUs*dt)
		}
		e.addUserUsage(jobs, held, dt)
		st.at = now
	}
	out := make([]sched.Team, len(teams))
	for i, t := range teams {
		out[i] = sched.Team{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, Weight: t.Weight,
			UsageGPUSeconds: st.usage[t.Name], MaxGPUsPerUser: t.MaxGPUsPerUser, UserCaps: t.UserCaps,
			UserUsage: maps.Clone(st.users[t.Name]), InteractiveGPUs: t.SessionPriorityGPUs}
	}
	if now.Sub(st.savedAt) >= usageSaveEvery {
		if err := e.cfg.Store.SetTeamUsage(ctx, st.usage, now); err != nil {
			return nil, err
		}
		if err := e.saveUserUsage(ctx, now); err != nil {
			return nil, err
		}
		st.savedAt = now
	}
	return out, nil
}

// halfLifeS is the half-life of team usage: Config.HalfLife, its default
// when zero, and no decay (-1, as sched.DecayUsage reads it) when
// negative.
func (e *Engine) halfLifeS() float64 { return halfLifeSeconds(e.cfg.HalfLife) }

// HalfLifeS is the half-life of team usage in seconds, -1 for no decay:
// what a replay of the cluster's history (core/whatif) starts from.
func (e *Engine) HalfLifeS() float64 { return e.halfLifeS() }

func halfLifeSeconds(h time.Duration) float64 {
	switch {
	case h == 0:
		return sched.DefaultHalfLifeS
	case h < 0:
		return -1
	}
	return h.Seconds()
}

// recordShares keeps each team's standing after a pass for the portal and,
// once a minute, records it for the usage charts.
func (e *Engine) recordShares(ctx context.Context, snap sched.Snapshot, d sched.Decisions, now time.Time) error {
	if len(snap.Teams) == 0 {
		return nil
	}
	shares := sched.FairShare(snap.Teams, snap.Jobs)
	e.recordUserShares(snap)
	borrowed := make(map[int64]time.Time, len(d.Borrowed))
	for k, id := range d.Borrowed {
		var at time.Time
		if k < len(d.ReclaimableAt) {
			at = ClockTime(d.ReclaimableAt[k])
		}
		borrowed[id] = at
	}
	e.shareMu.Lock()
	e.shares, e.borrowed = shares, borrowed
	e.shareMu.Unlock()
	st := &e.teamState
	if now.Sub(st.sampledAt) < teamSampleEvery {
		return nil
	}
	guarantees := make(map[string]int, len(snap.Teams))
	for _, t := range snap.Teams {
		guarantees[t.Name] = t.GuaranteeGPUs
	}
	for i := range st.runs {
		_, st.runs[i].Beyond = borrowed[st.runs[i].Job]
	}
	fig := usage.Of(st.runs, guarantees)
	samples := make([]TeamSample, 0, len(shares))
	for _, s := range shares {
		t := fig.Team(s.Name)
		samples = append(samples, TeamSample{Team: s.Name, At: now, InUseGPUs: t.InUseGPUs,
			BorrowedGPUs: t.BorrowedGPUs, GuaranteeGPUs: s.GuaranteeGPUs})
	}
	st.sampledAt = now
	return e.cfg.Store.RecordTeamSamples(ctx, samples)
}

// FairShare returns each team's standing as of the last pass, by name.
func (e *Engine) FairShare() []sched.TeamShare {
	e.shareMu.Lock()
	defer e.shareMu.Unlock()
	out := append([]sched.TeamShare(nil), e.shares...)
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// Borrowed reports whether a running job runs on GPUs lent by other teams.
func (e *Engine) Borrowed(id int64) bool {
	_, ok := e.Reclaimable(id)
	return ok
}

// Reclaimable tells when a running job that runs on GPUs lent by other
// teams may be reclaimed, as of the last pass (sched.Decisions.
// ReclaimableAt), and whether it is borrowed.
func (e *Engine) Reclaimable(id int64) (time.Time, bool) {
	e.shareMu.Lock()
	defer e.shareMu.Unlock()
	at, ok := e.borrowed[id]
	return at, ok
}

// usageRun is running job j as the GPU count sees it.
func usageRun(j *Job) usage.Run {
	r := usage.Run{Job: j.ID, Team: j.Team, GPUs: gpuNames(j.Placement), Sharing: j.Sharing, Fraction: j.GPUFraction}
	if j.LastStartAt != nil {
		r.Since = *j.LastStartAt
	}
	return r
}
