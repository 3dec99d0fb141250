package web

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// The converters from the store's and the engine's values to the api
// types: one per entity, each computing the entity's derived figures
// from a moment, so that a page, the API, a topic and the CLI that show
// the same figure show the same number.

// moment is what the portal knows at one instant: the running jobs, the
// places and counts of the unfinished ones, the teams, and the figures
// derived from them (core/usage). A request or a published update reads
// one moment and converts everything it shows from it.
type moment struct {
	now time.Time
	// running are the running jobs, whole rows (unfinished in moments
	// made by newMoment of other jobs too: only the running count).
	running []models.Job
	// queued is every unfinished job's QueueRow, by ID: what the queues'
	// order and counts are computed from, never their whole rows, so that
	// a moment costs what a page shows, not the queue's length (issue
	// 33); nil in a moment of the running jobs alone.
	queued    []models.QueueRow
	teams     []models.Team
	fair      map[string]sched.TeamShare // the last pass's fair-share standing
	figures   usage.Figures
	forecasts map[int64]engine.JobForecast // the latest start forecasts
	// waits are why waiting jobs wait, and their places in their queues,
	// as of the engine's last pass, on the leader; nil on a follower,
	// which shows the store's reasons (their figures up to a refresh
	// behind) and no places: engine.Engine.Waits.
	waits map[int64]sched.Wait
	// held are the runs that ended with their outcome not yet recorded
	// (the store cannot save), which the store still says run.
	held map[int64]engine.HeldExit
}

// moment reads the store and the engine once: the running jobs whole,
// the others' QueueRows.
func (s *Server) moment(ctx context.Context) (*moment, error) {
	m, err := s.runningMoment(ctx)
	if err != nil {
		return nil, err
	}
	if m.queued, err = s.cfg.Store.QueueRows(ctx); err != nil {
		return nil, err
	}
	if m.forecasts, err = s.forecasts(ctx); err != nil {
		return nil, err
	}
	if s.leading() {
		m.waits = s.cfg.Engine.Waits()
	}
	return m, nil
}

// shownMoment is a moment to convert js with, and only them: their start
// forecasts and wait reasons and, while one of them runs, the figures of
// the running jobs (what its share of its GPUs and its borrowing are
// figured from). It reads no other waiting job, so that a page or an
// answer that shows one job, one array or one page of jobs costs the
// same however long the queue is (issue 23); each of js converts with it
// as it does with s.moment.
func (s *Server) shownMoment(ctx context.Context, js ...models.Job) (*moment, error) {
	m := &moment{now: s.cfg.Now()}
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
		if m, err = s.runningMoment(ctx); err != nil {
			return nil, err
		}
	}
	if len(waiting) == 0 {
		return m, nil // neither a forecast nor the engine's reason shows
	}
	m.forecasts = make(map[int64]engine.JobForecast, len(waiting))
	if s.leading() {
		waits := s.cfg.Engine.Waits()
		m.waits = make(map[int64]sched.Wait, len(waiting))
		for _, id := range waiting {
			if f, ok := s.cfg.Engine.Forecast(id); ok {
				m.forecasts[id] = f
			}
			if w, ok := waits[id]; ok {
				m.waits[id] = w
			}
		}
		return m, nil
	}
	rows, err := s.cfg.Store.LatestForecastsOf(ctx, waiting)
	if err != nil {
		return nil, err
	}
	for id, f := range rows {
		m.forecasts[id] = forecastOf(f)
	}
	return m, nil
}

// runningMoment is a moment of the running jobs alone, without the waiting
// ones, their forecasts or their reasons: what the GPUs' holders, the
// jobs' shares of their GPUs and the teams' GPUs in use and borrowed are
// figured from (usage.Of counts only running jobs), the same as in
// s.moment, for what the queue's length does not change.
func (s *Server) runningMoment(ctx context.Context) (*moment, error) {
	rs, err := s.cfg.Store.RunningJobs(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		return nil, err
	}
	m := newMoment(s.cfg.Now(), rs, ts, s.cfg.Engine.FairShare(), s.cfg.Engine.Borrowed)
	m.held = s.cfg.Engine.HeldExits()
	return m, nil
}

// forecasts are the latest start forecasts of the waiting jobs: the
// engine's on the leader, and on a follower replica, which runs no
// engine, the leader's as it stored them (models.ForecastKindLatest).
func (s *Server) forecasts(ctx context.Context) (map[int64]engine.JobForecast, error) {
	if s.leading() {
		return s.cfg.Engine.Forecasts(), nil
	}
	rows, err := s.cfg.Store.LatestForecasts(ctx)
	if err != nil {
		return nil, err
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
func newMoment(now time.Time, unfinished []models.Job, teams []models.Team, fair []sched.TeamShare, beyond func(id int64) bool) *moment {
	m := &moment{now: now, running: unfinished, teams: teams, fair: make(map[string]sched.TeamShare, len(fair))}
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
	m.figures = usage.Of(runs, guarantees)
	return m
}

// job converts j with the figures of m, its start forecast included. The
// engine's live details (lane, resources) are added by Server.jobOf.
func (m *moment) job(j *models.Job) api.Job {
	sv := j.Service(m.now)
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
	}
	if j.State == job.Running {
		now := m.now
		out.AsOf = &now
		out.HeldGPUs = m.figures.Held(j.ID)
		out.Borrowed = m.figures.Borrowed(j.ID)
		if h, ok := m.held[j.ID]; ok && h.Run == j.Run {
			// Ended, its outcome not yet stored: say so, and its figures
			// as of its end, not growing.
			at := h.At
			sv := j.Service(at)
			out.Reason, out.AsOf = heldReason(h, m.now), &at
			out.ExecutedS, out.AttainedService = sv.ExecutedS, sv.GPUSeconds
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
			LostS: j.ResumeLostS, LostTotalS: j.LostS}
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

// jobOf is j as the API and the job:<id> topic show it: its figures and
// forecast as of m, while it runs its lane and resources, and while it
// waits the GPUs reserved for it (on the leader, whose engine reserved
// them).
func (s *Server) jobOf(m *moment, j *models.Job) api.Job {
	out := m.job(j)
	if j.Sharing && j.State == job.Running {
		out.Lane = s.jobLane(j.ID)
	}
	if j.State == job.Running {
		out.Resources = s.jobResources(j.ID)
	}
	if j.State.Waiting() && s.leading() {
		if r, from, ok := s.cfg.Engine.Reservation(j.ID); ok {
			out.Reservation = &api.Reservation{GPUs: make([]string, len(r.GPUs)), Count: r.Count, From: from}
			for i, g := range r.GPUs {
				out.Reservation.GPUs[i] = g.String()
			}
		}
	}
	return out
}

// heldReason is what a running job whose run ended, its outcome held
// (engine.HeldExit), shows as its reason at now.
func heldReason(h engine.HeldExit, now time.Time) string {
	ended := fmt.Sprintf("run %d ended on %s at %s (%s ago) with exit code %d", h.Run, h.Node,
		h.At.Local().Format("15:04:05"), max(0, now.Sub(h.At)).Round(time.Second), h.ExitCode)
	if h.Infra {
		ended = fmt.Sprintf("run %d was ended by the cluster on %s at %s (%s ago), not by the job", h.Run, h.Node,
			h.At.Local().Format("15:04:05"), max(0, now.Sub(h.At)).Round(time.Second))
	}
	why := "the server cannot save now"
	if h.Err != nil {
		why += " (" + causeOf(h.Err) + ")"
	}
	return ended + "; not yet recorded: " + why + ". It shows as running until it is; the server tries every pass."
}

// forecast is a waiting job's start forecast at m; nil unless it waits.
func (m *moment) forecast(j *models.Job) *api.Forecast {
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
func (m *moment) reason(j *models.Job) string {
	if w, ok := m.waits[j.ID]; ok && j.State.Waiting() && !j.Held() {
		return w.Reason
	}
	return j.Reason
}

// position is j's place in its queue as of the engine's last pass
// (api.Job.Position); 0 when it does not wait, is held, or the place is
// not known here.
func (m *moment) position(j *models.Job) int {
	if w, ok := m.waits[j.ID]; ok && j.State.Waiting() && !j.Held() {
		return w.Position
	}
	return 0
}

// rowPosition is position for a QueueRow.
func (m *moment) rowPosition(r *models.QueueRow) int {
	if w, ok := m.waits[r.ID]; ok && r.State.Waiting() && !r.Held() {
		return w.Position
	}
	return 0
}

// queueJob converts j for a queue; visible says whether the viewer may
// see its name, user and reason.
func (m *moment) queueJob(j *models.Job, visible bool) api.QueueJob {
	sv := j.Service(m.now)
	out := api.QueueJob{ID: j.ID, Team: j.Team, GPUs: j.GPUs, State: j.State, ExecutedS: sv.ExecutedS,
		AttainedService: sv.GPUSeconds, Borrowed: m.figures.Borrowed(j.ID), Position: m.position(j), Forecast: m.forecast(j)}
	if visible {
		out.Name, out.User, out.Reason = j.Name, j.User, m.reason(j)
	} else if out.Forecast != nil {
		out.Forecast.Reason = "" // it may name the user
	}
	return out
}

// idlePolicyOf is t's idle policy as the API gives it: its own rule's
// fields null where it has none (the server's apply).
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

// teamShare converts t: its GPUs from m's figures, its fair-share
// factor from the last scheduling pass (1 before the first).
func (m *moment) teamShare(t models.Team) api.TeamShare {
	st := m.figures.Team(t.Name)
	out := api.TeamShare{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, Weight: t.Weight, MaxGPUsPerUser: t.MaxGPUsPerUser,
		InUseGPUs: st.InUseGPUs, BorrowedGPUs: st.BorrowedGPUs, UsageGPUSeconds: t.UsageGPUSeconds, Factor: 1,
		DefaultTimeLimitS: t.DefaultTimeLimitS, MaxTimeLimitS: t.MaxTimeLimitS,
		IdlePolicy:    idlePolicyOf(&t),
		SessionPolicy: api.SessionPolicy{MaxSessionHours: float64(t.MaxSessionS) / 3600, PriorityGPUs: t.SessionPriorityGPUs},
		BatchPolicy:   api.BatchPolicy{Priorities: t.Priorities(), HighGPUs: t.HighPriorityGPUs}}
	if sh, ok := m.fair[t.Name]; ok {
		out.UsageGPUSeconds, out.Entitlement, out.UsageShare, out.Factor = sh.UsageGPUSeconds, sh.Entitlement, sh.UsageShare, sh.Factor
	}
	return out
}

// teamShares is every team's standing at m.
func (m *moment) teamShares() []api.TeamShare {
	out := make([]api.TeamShare, 0, len(m.teams))
	for _, t := range m.teams {
		out = append(out, m.teamShare(t))
	}
	return out
}

// pointOf converts a GPU reading.
func pointOf(p telemetry.Point) api.Point {
	out := api.Point{T: p.T, MemUsedMiB: p.MemUsedMiB, MemMiB: p.MemMiB, MemReservedMiB: p.MemReservedMiB, UtilPct: p.UtilPct,
		Jobs: make([]api.PointJob, len(p.Jobs)), Held: append([]int64{}, p.Held...), PowerW: p.PowerW, TempC: p.TempC}
	for i, j := range p.Jobs {
		out.Jobs[i] = api.PointJob{JobID: j.JobID, MemMiB: j.MemMiB}
	}
	return out
}

// pointsOf converts GPU readings; never nil.
func pointsOf(ps []telemetry.Point) []api.Point {
	out := make([]api.Point, len(ps))
	for i, p := range ps {
		out[i] = pointOf(p)
	}
	return out
}

// jobMemoryOf converts a job's memory readings; never nil.
func jobMemoryOf(ps []telemetry.JobPoint) []api.JobMemory {
	out := make([]api.JobMemory, len(ps))
	for i, p := range ps {
		out[i] = api.JobMemory{T: p.T, Node: p.GPU.Node, GPU: p.GPU.Index, MemMiB: p.MemMiB}
	}
	return out
}

// fmtGPUs writes a number of GPUs as a person reads it, to the hundredth
// (as static/history.js does): 3, 2.5, 0.33.
func fmtGPUs(n float64) string {
	r := math.Round(n*100) / 100
	if r == 0 {
		r = 0 // not -0
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}
