// Package enginestore is the engine's store over the database: it turns
// the rows of package models into the engine's jobs, teams and machine
// states, and typed placements into the stored "node:index" strings and
// back, so that neither the engine imports models (and the database) nor
// models the engine. Everything else the engine asks of its store
// models.Store answers in core types, and Store passes it through.
package enginestore

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
)

// Store is a models.Store as the engine's Store.
type Store struct {
	*models.Store
	// view keeps the unfinished jobs between the engine's passes (view.go);
	// nil: every pass reads them whole.
	view *jobView
}

// New wraps s for the engine.
func New(s *models.Store) Store { return Store{Store: s, view: new(jobView)} }

// Store is the engine's whole Store: a method missing here does not compile.
var _ engine.Store = Store{}

// UnfinishedEngineJobs returns the jobs the engine acts on
// (models.Store.JobsToSchedule) as it sees them.
func (s Store) UnfinishedEngineJobs(ctx context.Context) ([]engine.Job, error) {
	out, err := s.unfinished(ctx)
	if err != nil {
		return nil, err
	}
	var depIDs []int64
	for i := range out { // by index: a Job is 576 B, and a long queue 10,000 of them
		for _, d := range out[i].Deps {
			depIDs = append(depIDs, d.JobID)
		}
	}
	if len(depIDs) == 0 {
		return out, nil
	}
	states, arrays, err := s.JobStatesAndArrays(ctx, depIDs)
	if err != nil {
		return nil, err
	}
	for i := range out {
		for k, d := range out[i].Deps {
			out[i].Deps[k].State = states[d.JobID]
			out[i].Deps[k].Array = arrays[d.JobID] // its reason names the array
		}
	}
	return out, nil
}

// UnixAccounts returns the Unix account of each of the portal users named
// (login names): the account their jobs run as on the machines (agent
// --run-as owner, sbatch --uid and --gid under --slurm-run-as owner), as
// models.Store.UnixNames gives it (the directory's, the identity
// provider's or an admin's choice, else the login name).
func (s Store) UnixAccounts(ctx context.Context, users []string) (map[string]string, error) {
	m, err := s.UnixNames(ctx, users)
	if err != nil {
		return nil, fmt.Errorf("unix accounts of jobs' owners: %w", err)
	}
	return m, nil
}

// owners lists the owners of js once each.
func owners(js []engine.Job) []string {
	seen := make(map[string]bool, len(js))
	var out []string
	for _, j := range js {
		if !seen[j.User] {
			seen[j.User] = true
			out = append(out, j.User)
		}
	}
	return out
}

// engineJob is a job row as the engine sees it.
func (s Store) engineJob(j models.Job) engine.Job {
	ej := engine.Job{
		ID: j.ID, Team: j.Team, User: j.User, GPUs: j.GPUs, GPUMemMiB: j.GPUMemMiB,
		Command: j.Command, SimDuration: j.SimDuration, SimUtilPct: j.SimUtilPct, State: knownState(j.State), Run: j.Run,
		SubmittedAt: j.SubmittedAt, Placement: parsePlacement(j.Placement), LastStartAt: j.LastStartAt,
		ExecutedS: j.ExecutedS, AttainedService: j.AttainedService, Accrual: j.Accrual(),
		Model: j.Model, Queue: sched.QueueState(j.QueueState()),
		Failures: j.Failures, ExitCode: j.ExitCode, RetryAt: j.RetryAt, CancelRequest: j.CancelRequest, Stop: j.StopRequest(),
		Sharing: j.Sharing, GPUFraction: j.GPUFraction, Memory: j.MemoryEstimate(),
		BatchSize: j.BatchSize, Image: j.Image, Session: s.JobSession(&j),
		Env: j.Env, Dir: j.Workdir, TimeLimit: j.TimeLimit(), Retries: j.Retries,
		Array: j.Task(), ArrayLimit: j.ArrayLimit, ReenteredAt: j.ReenteredAt,
		InteractivePriority: j.InteractivePriority, Priority: j.Priority, Name: j.Name, TasksPerGPU: j.TasksPerGPU,
	}
	for _, d := range j.Deps() {
		ej.Deps = append(ej.Deps, engine.Dep{Dependency: d})
	}
	// A profile that no longer decodes (it was validated when the job was
	// submitted) leaves the job to history and the catalogue.
	ej.CPUProfile, _ = j.DeclaredProfile()
	return ej
}

// knownState returns s as the job package's constant of that name (a
// string that the program holds once, not one per row read), or s when
// it names none. The engine tests every job's state every pass.
func knownState(s job.State) job.State {
	for _, k := range job.States {
		if s == k {
			return k
		}
	}
	return s
}

// MarkStarted records a new run of a waiting job on placement and
// returns its number.
func (s Store) MarkStarted(ctx context.Context, id int64, placement []gpu.Ref, now time.Time) (int64, error) {
	return s.Store.MarkStarted(ctx, id, formatPlacement(placement), now)
}

// MarkStartedAll records the starts of a pass in one transaction
// (models.Store.MarkStartedAll).
func (s Store) MarkStartedAll(ctx context.Context, starts []engine.StartRecord, now time.Time) ([]int64, []error, error) {
	rows := make([]models.Start, len(starts))
	for i, st := range starts {
		rows[i] = models.Start{Job: st.JobID, Placement: formatPlacement(st.Placement), CPUs: st.CPUs}
	}
	return s.Store.MarkStartedAll(ctx, rows, now)
}

// MarkResumed puts a job that waits again back to running as its last
// run ref, on placement.
func (s Store) MarkResumed(ctx context.Context, ref job.RunRef, placement []gpu.Ref, reason string, now time.Time) (time.Time, error) {
	return s.Store.MarkResumed(ctx, ref, formatPlacement(placement), reason, now)
}

// formatPlacement is a placement as the store keeps it: "node:index" per
// GPU.
func formatPlacement(p []gpu.Ref) []string {
	out := make([]string, len(p))
	for i, g := range p {
		out[i] = g.String()
	}
	return out
}

// parsePlacement reads a stored placement back, leaving out what does
// not parse; none is nil.
func parsePlacement(p []string) []gpu.Ref {
	if len(p) == 0 {
		return nil
	}
	return gpu.ParsePlacement(p)
}

// EngineTeams returns every team's share, caps and saved usage.
func (s Store) EngineTeams(ctx context.Context) ([]engine.Team, error) {
	ts, err := s.Teams(ctx)
	if err != nil {
		return nil, err
	}
	caps, err := s.UserCaps(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Team, len(ts))
	for i, t := range ts {
		out[i] = engine.Team{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, Weight: t.Weight,
			MaxGPUsPerUser: t.MaxGPUsPerUser, UserCaps: caps[t.Name],
			UsageGPUSeconds: t.UsageGPUSeconds, UsageAt: t.UsageAt, SessionPriorityGPUs: t.SessionPriorityGPUs}
	}
	return out, nil
}

// UserUsages returns every user's saved decayed usage within each team.
func (s Store) UserUsages(ctx context.Context) ([]engine.UserUsage, error) {
	rows, err := s.Store.UserUsages(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]engine.UserUsage, len(rows))
	for i, r := range rows {
		out[i] = engine.UserUsage{Team: r.Team, User: r.User, UsageGPUSeconds: r.UsageGPUSeconds, UsageAt: r.UsageAt}
	}
	return out, nil
}

// SetUserUsage saves users' decayed usage within their teams as of at.
func (s Store) SetUserUsage(ctx context.Context, usage []engine.UserUsage, at time.Time) error {
	m := make(map[models.TeamUser]float64, len(usage))
	for _, u := range usage {
		m[models.TeamUser{Team: u.Team, User: u.User}] = u.UsageGPUSeconds
	}
	return s.Store.SetUserUsage(ctx, m, at)
}

// RecordTeamSamples stores where teams stood.
func (s Store) RecordTeamSamples(ctx context.Context, samples []engine.TeamSample) error {
	rows := make([]models.TeamSample, len(samples))
	for i, t := range samples {
		rows[i] = models.TeamSample{Team: t.Team, At: t.At, InUseGPUs: t.InUseGPUs, BorrowedGPUs: t.BorrowedGPUs, GuaranteeGPUs: t.GuaranteeGPUs}
	}
	return s.AddTeamSamples(ctx, rows)
}

// NodeStates returns the machines held and the GPUs out of service.
func (s Store) NodeStates(ctx context.Context) (engine.NodeStates, error) {
	out := engine.NodeStates{Cordoned: map[string]bool{}, Draining: map[string]bool{}}
	holds, err := s.HeldNodes(ctx)
	if err != nil {
		return out, err
	}
	for _, h := range holds {
		if h.Cordoned {
			out.Cordoned[h.Node] = true
		}
		if h.Draining {
			out.Draining[h.Node] = true
		}
	}
	faults, err := s.GPUFaults(ctx)
	if err != nil {
		return out, err
	}
	for _, f := range faults {
		out.Faults = append(out.Faults, engine.GPUFault{Ref: gpu.Ref{Node: f.Node, Index: f.GPUIndex}, Reason: f.Reason, At: f.At})
	}
	return out, nil
}

// RecordGPUFault takes a GPU out of service; for a GPU already out, the
// new fault replaces the one before, as in the engine.
func (s Store) RecordGPUFault(ctx context.Context, f engine.GPUFault) error {
	return s.Store.RecordGPUFault(ctx, models.GPUFault{Node: f.Node, GPUIndex: f.Index, Reason: f.Reason, At: f.At})
}

// RecentSubmissions returns up to limit jobs submitted since then, newest
// first, as the engine sees jobs: what forecasts expect arrivals to be
// like.
func (s Store) RecentSubmissions(ctx context.Context, since time.Time, limit int) ([]engine.Job, error) {
	js, err := s.SubmittedSince(ctx, since, limit)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Job, len(js))
	for i, j := range js {
		out[i] = s.engineJob(j)
	}
	return out, nil
}

// RecordForecasts stores forecasts (models.Forecast); one of a kind the
// job already has is left as it was.
func (s Store) RecordForecasts(ctx context.Context, rs []engine.ForecastRecord) error {
	rows := make([]models.Forecast, len(rs))
	for i, r := range rs {
		rows[i] = models.Forecast{JobID: r.JobID, Kind: r.Kind, MadeAt: r.MadeAt, State: string(r.State),
			Earliest: r.Earliest, Likely: r.Likely, Latest: r.Latest, Reason: r.Reason}
	}
	return s.AddForecasts(ctx, rows)
}

// SetLatestForecasts stores the jobs' latest forecasts
// (models.ForecastKindLatest), which follower replicas show.
func (s Store) SetLatestForecasts(ctx context.Context, rs []engine.ForecastRecord) error {
	rows := make([]models.Forecast, len(rs))
	for i, r := range rs {
		rows[i] = models.Forecast{JobID: r.JobID, MadeAt: r.MadeAt, State: string(r.State),
			Earliest: r.Earliest, Likely: r.Likely, Latest: r.Latest, Reason: r.Reason}
	}
	return s.Store.SetLatestForecasts(ctx, rows)
}
