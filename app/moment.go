package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// The converters from the store's and the engine's values to the api
// types: one per entity, each computing the entity's derived figures
// from a moment, so that a page, the API, a topic and the CLI that show
// the same figure show the same number.

// JobEngine is what the reads of jobs, queues and forecasts ask of the
// scheduling engine; *engine.Engine is one.
type JobEngine interface {
	// Waits are why waiting jobs wait and their places, as of the last
	// pass.
	Waits() map[int64]sched.Wait
	Forecast(id int64) (engine.JobForecast, bool)
	Forecasts() map[int64]engine.JobForecast
	ForecastInfo() engine.ForecastInfo
	PassInterval() time.Duration
	FairShare() []sched.TeamShare
	// Borrowed tells the jobs the last pass counted beyond their team's
	// guarantee.
	Borrowed(id int64) bool
	// Reclaimable tells when a borrowed job may be reclaimed, as of the
	// last pass, and whether it is borrowed.
	Reclaimable(id int64) (time.Time, bool)
	Reservation(id int64) (r sched.Reservation, from time.Time, ok bool)
	JobResources(id int64) (engine.JobResources, bool)
	Scheduler() *sched.Scheduler
	HalfLifeS() float64
	// HeldExits are the runs that ended with their outcome not yet
	// recorded (the store cannot save), by job.
	HeldExits() map[int64]engine.HeldExit
	// StoppingRuns are the runs asked to stop that have not exited, by
	// job.
	StoppingRuns() map[int64]engine.StoppingRun
	// GoneNodes are the machines that disconnected, with when: a job
	// still running there says so (silentMachines).
	GoneNodes() []engine.GoneNode
}

// Moment is what the portal knows at one instant: the running jobs, the
// places and counts of the unfinished ones, the teams, and the figures
// derived from them (core/usage). A request or a published update reads
// one moment and converts everything it shows from it.
type Moment struct {
	Now time.Time
	// running are the running jobs, whole rows (unfinished in moments
	// made by newMoment of other jobs too: only the running count).
	running []models.Job
	// queued is every unfinished job's QueueRow, by ID: what the queues'
	// order and counts are computed from, never their whole rows, so that
	// a moment costs what a page shows, not the queue's length (issue
	// 33); nil in a moment of the running jobs alone.
	queued  []models.QueueRow
	teams   []models.Team
	Figures usage.Figures
	// Waits are why waiting jobs wait, and their places in their queues,
	// as of the engine's last pass, on the leader; nil on a follower,
	// which shows the store's reasons (their figures up to a refresh
	// behind) and no places: engine.Engine.Waits.
	Waits     map[int64]sched.Wait
	fair      map[string]sched.TeamShare   // the last pass's fair-share standing
	forecasts map[int64]engine.JobForecast // the latest start forecasts
	// held are the runs that ended with their outcome not yet recorded,
	// which the store still says run (engine.Engine.HeldExits).
	held map[int64]engine.HeldExit
	// stopping are the runs the engine asked to stop that still run
	// (engine.Engine.StoppingRuns).
	stopping map[int64]engine.StoppingRun
	// silent are the machines not heard for over UnheardAfter, or gone,
	// with when they were last heard.
	silent map[string]time.Time
	// stored are, on a follower, the reservations the leader stored, by
	// job (storedReservations); nil on the leader, which asks its engine.
	stored map[int64]sched.Reservation
	// orders keeps the queues' order between moments (queueOrder); nil:
	// each moment computes its own.
	orders *orderCache
}

// Running returns the running jobs of the moment.
func (m *Moment) Running() []Job { return jobViews(m.running) }

// Teams returns the teams of the moment.
func (m *Moment) Teams() []Team { return teamViews(m.teams) }

// Team returns the team called name, false when there is none.
func (m *Moment) Team(name string) (Team, bool) {
	for i := range m.teams {
		if m.teams[i].Name == name {
			return teamViews(m.teams[i : i+1])[0], true
		}
	}
	return Team{}, false
}

// leading reports whether this replica runs the engine.
func (s *App) leading() bool { return s.cfg.Leader == nil || s.cfg.Leader() }

// Moment reads the store and the engine once: the running jobs whole,
// the others' QueueRows.
func (s *App) Moment(ctx context.Context) (*Moment, error) {
	m, err := s.RunningMoment(ctx)
	if err != nil {
		return nil, err
	}
	if m.queued, err = s.cfg.Store.QueueRows(ctx); err != nil {
		return nil, stored(err)
	}
	if m.forecasts, err = s.latestForecasts(ctx); err != nil {
		return nil, err
	}
	if s.leading() {
		m.Waits = s.cfg.Engine.Waits()
	} else if m.stored, err = s.storedReservations(ctx); err != nil {
		return nil, err
	}
	m.orders = &s.orders
	return m, nil
}

// Reservations are the reservations of the scheduling leader's last
// pass, in its order: on the leader its engine's; on a follower replica,
// which runs no passes, as the leader stored them (table reservations,
// engine.ReservationStore), the same jobs, GPUs, "from" and "due". A
// job's page and the API (JobOf) and the cluster page (ReservedGPUs) show
// them from here.
func (s *App) Reservations(ctx context.Context) ([]sched.Reservation, error) {
	if s.leading() {
		return s.cfg.Engine.Reservations(), nil
	}
	rs, err := s.cfg.Engine.StoredReservations(ctx)
	if err != nil {
		return nil, stored(err)
	}
	return rs, nil
}

// ReservationShown is a reservation as the cluster page lists it: its
// job, its GPUs named ("GPUs node-3:0-7"), the job's start forecast (the
// one its page, the API and the CLI show: nil when the job no longer
// waits) and until when other jobs may start on the GPUs (From: those
// that end by then by their time limits), on the server's clock.
type ReservationShown struct {
	JobID    int64
	GPUs     string
	Forecast *api.Forecast
	From     time.Time
}

// ClusterReservations are the reservations the cluster page shows
// (Reservations), in the pass's order, and the GPUs they hold by
// "node:index". Each carries its job's forecast, read as the job's page
// reads it (ShownMoment), so that the two say the same start.
func (s *App) ClusterReservations(ctx context.Context) ([]ReservationShown, map[string]engine.ReservedGPU, error) {
	rs, err := s.Reservations(ctx)
	if err != nil {
		return nil, nil, err
	}
	if len(rs) == 0 {
		return nil, nil, nil
	}
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.JobID
	}
	rows, err := s.cfg.Store.JobsByID(ctx, ids)
	if err != nil {
		return nil, nil, stored(err)
	}
	js := jobViews(rows)
	m, err := s.ShownMoment(ctx, js...)
	if err != nil {
		return nil, nil, err
	}
	byID := make(map[int64]*api.Forecast, len(js))
	for i := range js {
		byID[js[i].ID] = m.forecast(&js[i].row)
	}
	shown := make([]ReservationShown, len(rs))
	for i, r := range rs {
		shown[i] = ReservationShown{JobID: r.JobID, GPUs: r.GPUText(), Forecast: byID[r.JobID], From: engine.ReservationFrom(r)}
	}
	return shown, engine.ReservedGPUsOf(rs), nil
}

// storedReservations are, on a follower replica, the reservations the
// leader stored (Reservations), by job.
func (s *App) storedReservations(ctx context.Context) (map[int64]sched.Reservation, error) {
	rs, err := s.Reservations(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]sched.Reservation, len(rs))
	for _, r := range rs {
		out[r.JobID] = r
	}
	return out, nil
}

// apiReservation is reservation r as the API and the job's page give it.
func apiReservation(r sched.Reservation) *api.Reservation {
	out := &api.Reservation{GPUs: make([]string, len(r.GPUs)), Count: r.Count,
		From: engine.ReservationFrom(r), Due: engine.ReservationDue(r)}
	for i, g := range r.GPUs {
		out.GPUs[i] = g.String()
	}
	return out
}

// ShownMoment is a moment to convert js with, and only them: their start
// forecasts and wait reasons and, while one of them runs, the figures of
// the running jobs (what its share of its GPUs and its borrowing are
// figured from). It reads no other waiting job, so that a page or an
// answer that shows one job, one array or one page of jobs costs the
// same however long the queue is (issue 23); each of js converts with it
// as it does with Moment.
func (s *App) ShownMoment(ctx context.Context, js ...Job) (*Moment, error) {
	m := &Moment{Now: s.cfg.Now()}
	var waiting []int64
	running := false
	for i := range js {
		switch {
		case js[i].State == job.Running:
			running = true
		case js[i].State.Waiting():
			waiting = append(waiting, js[i].ID)
		}
	}
	if running {
		var err error
		if m, err = s.RunningMoment(ctx); err != nil {
			return nil, err
		}
	}
	if len(waiting) == 0 {
		return m, nil // neither a forecast nor the engine's reason shows
	}
	m.forecasts = make(map[int64]engine.JobForecast, len(waiting))
	if s.leading() {
		waits := s.cfg.Engine.Waits()
		m.Waits = make(map[int64]sched.Wait, len(waiting))
		for _, id := range waiting {
			if f, ok := s.cfg.Engine.Forecast(id); ok {
				m.forecasts[id] = f
			}
			if w, ok := waits[id]; ok {
				m.Waits[id] = w
			}
		}
		return m, nil
	}
	rows, err := s.cfg.Store.LatestForecastsOf(ctx, waiting)
	if err != nil {
		return nil, stored(err)
	}
	for id, f := range rows {
		m.forecasts[id] = forecastOf(f)
	}
	if m.stored, err = s.storedReservations(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// RunningMoment is a moment of the running jobs alone, without the
// waiting ones, their forecasts or their reasons: what the GPUs' holders,
// the jobs' shares of their GPUs and the teams' GPUs in use and borrowed
// are figured from (usage.Of counts only running jobs), the same as in
// Moment, for what the queue's length does not change.
func (s *App) RunningMoment(ctx context.Context) (*Moment, error) {
	rs, err := s.cfg.Store.RunningJobs(ctx)
	if err != nil {
		return nil, stored(err)
	}
	ts, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		return nil, stored(err)
	}
	m := newMoment(s.cfg.Now(), rs, ts, s.cfg.Engine.FairShare(), s.cfg.Engine.Borrowed)
	m.held = s.cfg.Engine.HeldExits()
	m.stopping = s.cfg.Engine.StoppingRuns()
	m.silent = s.silentMachines(m.Now)
	return m, nil
}

// silentMachines are the machines not heard at now for over UnheardAfter
// (Config.Heard) and those that disconnected (Engine.GoneNodes), with
// when each was last heard.
func (s *App) silentMachines(now time.Time) map[string]time.Time {
	out := make(map[string]time.Time)
	for _, g := range s.cfg.Engine.GoneNodes() {
		out[g.Status.Name] = g.LostAt
	}
	if s.cfg.Heard != nil {
		for name, age := range s.cfg.Heard(now) {
			if age > UnheardAfter {
				out[name] = now.Add(-age)
			} else {
				delete(out, name) // connected again
			}
		}
	}
	return out
}

// latestForecasts are the latest start forecasts of the waiting jobs:
// the engine's on the leader, and on a follower replica, which runs no
// engine, the leader's as it stored them (models.ForecastKindLatest).
func (s *App) latestForecasts(ctx context.Context) (map[int64]engine.JobForecast, error) {
	if s.leading() {
		return s.cfg.Engine.Forecasts(), nil
	}
	rows, err := s.cfg.Store.LatestForecasts(ctx)
	if err != nil {
		return nil, stored(err)
	}
	out := make(map[int64]engine.JobForecast, len(rows))
	for id, f := range rows {
		out[id] = forecastOf(f)
	}
	return out, nil
}

// forecastOf is a stored latest forecast as the engine made it.
func forecastOf(f models.Forecast) engine.JobForecast {
	return engine.JobForecast{State: forecast.State(f.State), Earliest: timeOr(f.Earliest), Likely: timeOr(f.Likely),
		Latest: timeOr(f.Latest), Reason: f.Reason, MadeAt: f.MadeAt}
}

// timeOr is *t, the zero time for nil.
func timeOr(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// newMoment derives the figures of now from the unfinished jobs and the
// teams; fair is the last scheduling pass's standing of the teams, and
// beyond tells the jobs that pass counted beyond their team's guarantee.
func newMoment(now time.Time, unfinished []models.Job, teams []models.Team, fair []sched.TeamShare, beyond func(id int64) bool) *Moment {
	m := &Moment{Now: now, running: unfinished, teams: teams, fair: make(map[string]sched.TeamShare, len(fair))}
	for _, sh := range fair {
		m.fair[sh.Name] = sh
	}
	guarantees := make(map[string]int, len(teams))
	for _, t := range teams {
		guarantees[t.Name] = t.GuaranteeGPUs
	}
	var runs []usage.Run
	for i := range unfinished {
		j := &unfinished[i]
		if j.State != job.Running {
			continue
		}
		r := usage.Run{Job: j.ID, Team: j.Team, GPUs: j.Placement, Sharing: j.Sharing, Fraction: j.GPUFraction, Beyond: beyond(j.ID)}
		if j.LastStartAt != nil {
			r.Since = *j.LastStartAt
		}
		runs = append(runs, r)
	}
	m.Figures = usage.Of(runs, guarantees)
	return m
}

// Job converts j with the figures of m, its start forecast included. The
// engine's live details (resources, reservation) are added by App.JobOf.
func (m *Moment) Job(j *Job) api.Job { return m.apiJob(&j.row) }

// apiJob is Job for a row.
func (m *Moment) apiJob(j *models.Job) api.Job {
	sv := j.Service(m.Now)
	out := api.Job{
		ID: j.ID, Name: j.Name, Team: j.Team, User: j.User, GPUs: j.GPUs, State: j.State,
		Reason: m.reason(j), Position: m.position(j), Command: j.Command, Image: j.Image, TasksPerGPU: j.TasksPerGPU, GPUMemGB: float64(j.GPUMemMiB) / 1024,
		SubmittedAt: j.SubmittedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
		Placement: j.Placement, ExitCode: j.ExitCode, ExecutedS: sv.ExecutedS,
		AttainedService: sv.GPUSeconds, Preemptions: j.Preemptions,
		Model: j.Model, Queue: j.QueueIndex, Failures: j.Failures, RetryAt: j.RetryAt, Held: j.Held(),
		Sharing: j.Sharing, GPUFraction: j.GPUFraction, BatchSize: j.BatchSize, Parameters: j.Parameters,
		CPUProfile: declaredProfileJSON(j),
		Forecast:   m.forecast(j),
		AllocCPUs:  j.AllocCPUs,
	}
	if j.State == job.Running {
		now := m.Now
		out.AsOf = &now
		out.HeldGPUs = m.Figures.Held(j.ID)
		out.Borrowed = m.Figures.Borrowed(j.ID)
		if h, ok := m.heldExit(j); ok {
			// Ended, its outcome not yet stored: its figures as of its
			// end, not growing (its reason says so: reason).
			at := h.At
			sv := j.Service(at)
			out.AsOf, out.ExecutedS, out.AttainedService = &at, sv.ExecutedS, sv.GPUSeconds
		}
	}
	if out.Placement == nil {
		out.Placement = []string{}
	}
	if j.MemPersistentMiB > 0 || j.MemEphemeralMiB > 0 {
		out.MemoryEstimate = &api.MemoryEstimate{PersistentMiB: j.MemPersistentMiB, EphemeralMiB: j.MemEphemeralMiB, Source: j.MemSource}
	}
	if !j.IsSession() {
		out.Priority = job.PriorityName(j.Priority)
	}
	if j.IsSession() {
		out.Session = &api.Session{Type: j.SessionType, Port: j.SessionPort, Priority: j.InteractivePriority}
	} else if len(j.Command) == 0 {
		out.Sim = &api.SimSpec{DurationS: j.SimDuration, UtilPct: j.SimUtilPct}
	}
	if j.ResumeRun > 0 {
		out.Resume = &api.JobResume{Run: j.ResumeRun, FromRun: j.ResumeFromRun, CheckpointAt: j.ResumeCheckpointAt,
			FromNode: j.ResumeFromNode, LostS: j.ResumeLostS, LostTotalS: j.LostS}
	}
	if j.FinishedAt != nil {
		jct := j.JCT().Seconds()
		out.JCTS = &jct
	}
	out.Workdir, out.Retries, out.Dependencies = j.Workdir, j.Retries, j.Deps()
	if len(j.Env) > 0 {
		out.Env = make(map[string]string, len(j.Env))
		for _, kv := range j.Env {
			k, v, _ := strings.Cut(kv, "=")
			out.Env[k] = v
		}
	}
	if limit := j.TimeLimit(); limit > 0 {
		l := limit.Seconds()
		left := max(job.TimeLeft(limit, time.Duration(sv.ExecutedS*float64(time.Second))).Seconds(), 0)
		if j.State.Final() {
			left = max(l-j.ExecutedS, 0)
		}
		out.TimeLimitS, out.TimeLeftS = &l, &left
	}
	if t := j.Task(); t != nil {
		out.Array = &api.ArrayTask{ID: t.ID, Index: t.Index, Limit: j.ArrayLimit}
	}
	return out
}

// JobOf is j as the API and the job:<id> topic show it: its figures and
// forecast as of m, while it runs its resources, and while it waits the
// GPUs reserved for it (on the leader, whose engine reserved them; on a
// follower, as the leader stored them);
// while it runs sharing a GPU, its Salus lane, which the machines report.
func (s *App) JobOf(m *Moment, v *Job) api.Job {
	j := &v.row
	out := m.apiJob(j)
	if j.State == job.Running {
		out.Resources = s.jobResources(j.ID)
		if at, ok := s.cfg.Engine.Reclaimable(j.ID); ok && out.Borrowed && !at.IsZero() {
			out.ReclaimableAt = &at
		}
	}
	if j.Sharing && j.State == job.Running {
		out.Lane = s.jobLane(j.ID)
	}
	if j.State.Waiting() && !s.leading() {
		if r, ok := m.stored[j.ID]; ok {
			out.Reservation = apiReservation(r)
		}
	}
	if j.State.Waiting() && s.leading() {
		if r, _, ok := s.cfg.Engine.Reservation(j.ID); ok {
			out.Reservation = apiReservation(r)
		}
	}
	return out
}

// jobResources is a running job's CPUs and memory; nil when the engine
// holds no allocation for it.
func (s *App) jobResources(id int64) *api.JobResources {
	jr, ok := s.cfg.Engine.JobResources(id)
	if !ok {
		return nil
	}
	out := &api.JobResources{Allocations: []api.Allocation{}, Profile: api.CPUProfile{
		Source: string(jr.ProfileSource), Family: jr.Profile.Family, CPU: curvePoints(jr.Profile.CPU), Mem: curvePoints(jr.Profile.Mem)}}
	for _, a := range jr.Allocations {
		aj := api.Allocation{Node: a.Node, GPUs: a.GPUs, CPUMilli: a.CPUMilli, MemMiB: a.MemMiB,
			PropCPUMilli: a.PropCPUMilli, PropMemMiB: a.PropMemMiB, Speed: a.Speed, PropSpeed: a.PropSpeed, Reason: a.Reason}
		for _, u := range jr.Usage {
			if u.Node == a.Node {
				cpu, mem := u.UsedCPUMilli, u.UsedMemMiB
				aj.UsedCPUMilli, aj.UsedMemMiB, aj.Enforced, aj.Note = &cpu, &mem, u.Enforced, u.Note
			}
		}
		out.Allocations = append(out.Allocations, aj)
	}
	return out
}

// curvePoints is a sensitivity curve as the API gives it: [x, speed] pairs.
func curvePoints(c synergy.Curve) [][2]float64 {
	out := make([][2]float64, len(c))
	for i, p := range c {
		out[i] = [2]float64{p.X, p.Speed}
	}
	return out
}

// declaredProfileJSON is the profile the user declared for j, for the
// job's JSON; nil when none was.
func declaredProfileJSON(j *models.Job) *api.CPUProfile {
	p, err := j.DeclaredProfile()
	if err != nil || p == nil {
		return nil
	}
	return &api.CPUProfile{Source: string(synergy.SourceDeclared), Family: p.Family, CPU: curvePoints(p.CPU), Mem: curvePoints(p.Mem)}
}

// forecast is a waiting job's start forecast at m; nil unless it waits.
func (m *Moment) forecast(j *models.Job) *api.Forecast {
	if !j.State.Waiting() {
		return nil
	}
	if j.Held() {
		return &api.Forecast{State: api.ForecastHeld, Reason: "held: " + j.Reason}
	}
	f, ok := m.forecasts[j.ID]
	if !ok && (len(j.Dependencies) > 0 || j.ArrayLimit > 0) && j.Reason != "submitted" {
		// Kept from the scheduler until its dependencies or its array
		// let it (core/engine/gates.go): nothing forecasts it before.
		// Its reason says what it waits for; the forecast does not say
		// it again (the job's page shows both).
		return &api.Forecast{State: api.ForecastUnknown, Reason: "forecast once its dependencies or its array let it start"}
	}
	if !ok {
		return &api.Forecast{State: api.ForecastUnknown, Reason: "not forecast yet: a forecast follows every change within seconds"}
	}
	return &api.Forecast{State: string(f.State), Earliest: timeOrNil(f.Earliest), Likely: timeOrNil(f.Likely),
		Latest: timeOrNil(f.Latest), Reason: f.Reason, MadeAt: timeOrNil(f.MadeAt)}
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// reason is why j waits, or why it ended: the engine's reason of its
// last pass for a job that waits for GPUs on the leader, else the store's.
func (m *Moment) reason(j *models.Job) string {
	if w, ok := m.Waits[j.ID]; ok && j.State.Waiting() && !j.Held() {
		return w.Reason
	}
	if h, ok := m.heldExit(j); ok {
		return heldReason(h, m.Now)
	}
	if node, at, ok := m.silentPart(j); ok {
		return fmt.Sprintf("running as last known: %s was last heard %s ago, at %s; the job runs on if the machine does, and is requeued if it is lost",
			node, max(0, m.Now.Sub(at)).Round(time.Second), at.Local().Format("15:04:05"))
	}
	if s, ok := m.stopping[j.ID]; ok && j.State == job.Running && s.Run == j.Run {
		return stoppingReason(s, m.Now)
	}
	return j.Reason
}

// stoppingReason is what a running job asked to stop shows as its reason
// at now: why, since when, and until when it may save its work.
func stoppingReason(s engine.StoppingRun, now time.Time) string {
	out := fmt.Sprintf("asked to stop at %s (%s ago): %s; it runs on while it saves its work",
		s.At.Local().Format("15:04:05"), max(0, now.Sub(s.At)).Round(time.Second), s.Reason)
	if !s.KillBy.IsZero() {
		out += fmt.Sprintf(", until %s at the latest (the grace period)", s.KillBy.Local().Format("15:04:05"))
	}
	return out + ", then it is " + string(s.To)
}

// silentPart is the machine of running job j heard longest ago among
// those gone silent, if any.
func (m *Moment) silentPart(j *models.Job) (node string, at time.Time, ok bool) {
	if j.State != job.Running {
		return "", time.Time{}, false
	}
	for _, p := range j.Placement {
		name, _, _ := strings.Cut(p, ":")
		if t, silent := m.silent[name]; silent && (!ok || t.Before(at)) {
			node, at, ok = name, t, true
		}
	}
	return node, at, ok
}

// heldExit is the end of j's run in progress that the store has yet to
// record, if it ended.
func (m *Moment) heldExit(j *models.Job) (engine.HeldExit, bool) {
	h, ok := m.held[j.ID]
	return h, ok && j.State == job.Running && h.Run == j.Run
}

// heldReason is what a running job whose run ended, its outcome held
// (engine.HeldExit), shows as its reason at now: the store still says it
// runs (issue 32: the state shown is the state known).
func heldReason(h engine.HeldExit, now time.Time) string {
	ago := max(0, now.Sub(h.At)).Round(time.Second)
	ended := fmt.Sprintf("run %d ended on %s at %s (%s ago) with exit code %d", h.Run, h.Node, h.At.Local().Format("15:04:05"), ago, h.ExitCode)
	if h.Infra {
		ended = fmt.Sprintf("run %d was ended by the cluster on %s at %s (%s ago), not by the job", h.Run, h.Node, h.At.Local().Format("15:04:05"), ago)
	}
	why := "the server cannot save now"
	if c := models.Cause(h.Err); c != "" {
		why += " (" + c + ")"
	}
	return ended + "; not yet recorded: " + why + ". It shows as running until it is; the server tries every pass."
}

// position is j's place in its queue as of the engine's last pass
// (api.Job.Position); 0 when it does not wait, is held, or the place is
// not known here.
func (m *Moment) position(j *models.Job) int {
	if w, ok := m.Waits[j.ID]; ok && j.State.Waiting() && !j.Held() {
		return w.Position
	}
	return 0
}

// QueueJob converts j for a queue; visible says whether the viewer may
// see its name, user and reason.
func (m *Moment) QueueJob(j *Job, visible bool) api.QueueJob { return m.queueJob(&j.row, visible) }

// queueJob is QueueJob for a row.
func (m *Moment) queueJob(j *models.Job, visible bool) api.QueueJob {
	sv := j.Service(m.Now)
	out := api.QueueJob{ID: j.ID, Team: j.Team, GPUs: j.GPUs, State: j.State, ExecutedS: sv.ExecutedS,
		AttainedService: sv.GPUSeconds, Borrowed: m.Figures.Borrowed(j.ID), Position: m.position(j), Forecast: m.forecast(j)}
	if !j.IsSession() {
		out.Priority = job.PriorityName(j.Priority)
	}
	if visible {
		out.Name, out.User, out.Reason = j.Name, j.User, m.reason(j)
	} else if out.Forecast != nil {
		out.Forecast.Reason = "" // it may name the user
	}
	return out
}

// IdlePolicyOf is t's idle policy as the API gives it: its own rule's
// fields null where it has none (the server's apply).
func IdlePolicyOf(t *Team) api.IdlePolicy { return idlePolicyOf(&t.row) }

// idlePolicyOf is IdlePolicyOf for a row.
func idlePolicyOf(t *models.Team) api.IdlePolicy {
	out := api.IdlePolicy{ReclaimSessions: !t.IdleSpareSessions, ReclaimBatch: t.IdleReclaimBatch, MaxKeepAliveHours: t.MaxKeepAlive().Hours()}
	if t.IdleBelowPct > 0 {
		v := t.IdleBelowPct
		out.IdleBelowPct = &v
	}
	if t.IdleAfterS > 0 {
		v := float64(t.IdleAfterS)
		out.IdleAfterS = &v
	}
	return out
}

// TeamShare converts t: its GPUs from m's figures, its fair-share
// factor from the last scheduling pass (1 before the first).
func (m *Moment) TeamShare(t Team) api.TeamShare { return m.teamShare(t.row) }

// teamShare is TeamShare for a row.
func (m *Moment) teamShare(t models.Team) api.TeamShare {
	st := m.Figures.Team(t.Name)
	out := api.TeamShare{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, Weight: t.Weight, MaxGPUsPerUser: t.MaxGPUsPerUser,
		InUseGPUs: st.InUseGPUs, BorrowedGPUs: st.BorrowedGPUs, UsageGPUSeconds: t.UsageGPUSeconds, Factor: 1,
		DefaultTimeLimitS: t.DefaultTimeLimitS, MaxTimeLimitS: t.MaxTimeLimitS,
		IdlePolicy: idlePolicyOf(&t),
		SessionPolicy: api.SessionPolicy{Allowed: new(!t.SessionsOff), MaxGPUs: t.MaxSessionGPUs,
			MaxSessionHours: float64(t.MaxSessionS) / 3600, PriorityGPUs: t.SessionPriorityGPUs},
		BatchPolicy: api.BatchPolicy{Priorities: t.Priorities(), HighGPUs: t.HighPriorityGPUs}}
	if sh, ok := m.fair[t.Name]; ok {
		out.UsageGPUSeconds, out.Entitlement, out.UsageShare, out.Factor = sh.UsageGPUSeconds, sh.Entitlement, sh.UsageShare, sh.Factor
	}
	return out
}

// TeamShares is every team's standing at m.
func (m *Moment) TeamShares() []api.TeamShare {
	out := make([]api.TeamShare, 0, len(m.teams))
	for _, t := range m.teams {
		out = append(out, m.teamShare(t))
	}
	return out
}
