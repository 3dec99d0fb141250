package app

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
)

// A job's use of its GPUs, computed in one place for its page, the API
// and the CLI (GET /api/v1/jobs/{id} and .../usage), and its idle-GPU
// verdict (core/idle), for those and the team and cluster pages.
//
// The readings are the live per-second ones (the telemetry window) and,
// before them, the minute and hour rows of the GPU history: whole GPUs.
// A job's own memory is known where the agent reported it per job (the
// live window); utilization is always the whole GPU's.

// maxUsagePoints bounds the points per GPU of a usage answer.
const maxUsagePoints = 240

// gpuReading is one GPU's mean readings over [T, T+Step), Unix seconds.
type gpuReading struct {
	T, Step    int64
	UtilPct    float64
	MemUsedMiB float64
	MemMiB     int64
	Jobs       []gpu.JobMem // live readings only
	Live       bool
}

// jobMemIn returns job id's memory among a reading's jobs, and whether
// the reading counts it.
func jobMemIn(jobs []gpu.JobMem, id int64) (int64, bool) {
	for _, jm := range jobs {
		if jm.JobID == id {
			return jm.MemMiB, true
		}
	}
	return 0, false
}

// placementKeys reads "node:index" placements.
func placementKeys(placement []string) []gpu.Ref {
	var out []gpu.Ref
	for _, p := range placement {
		if k, ok := gpu.ParseRef(p); ok {
			out = append(out, k)
		}
	}
	return out
}

// gpuReadings returns the readings of GPUs keys in [from, to], oldest
// first: history rows up to where the live window starts, then live ones.
func (s *App) gpuReadings(ctx context.Context, keys []gpu.Ref, from, to time.Time) (map[gpu.Ref][]gpuReading, error) {
	out := make(map[gpu.Ref][]gpuReading, len(keys))
	liveFrom := make(map[gpu.Ref]int64, len(keys))
	needRows := false
	for _, k := range keys {
		var live []gpuReading
		for _, p := range s.cfg.Telemetry.GPU(k, from.Unix()) {
			if p.T > to.Unix() {
				break
			}
			live = append(live, gpuReading{T: p.T, Step: 1, UtilPct: p.UtilPct, MemUsedMiB: float64(p.MemUsedMiB),
				MemMiB: p.MemMiB, Jobs: p.Jobs, Live: true})
		}
		out[k] = live
		if len(live) > 0 {
			liveFrom[k] = live[0].T
		}
		if len(live) == 0 || live[0].T > from.Unix()+60 {
			needRows = true
		}
	}
	if !needRows {
		return out, nil
	}
	start := from.Unix()
	nodes := map[string]bool{}
	var names []string
	for _, k := range keys {
		if !nodes[k.Node] {
			nodes[k.Node] = true
			names = append(names, k.Node)
		}
	}
	rows, err := s.cfg.Store.GPUHistoryOnNodes(ctx, names, start-start%models.StepHour, to.Unix()+1)
	if err != nil {
		return nil, stored(err)
	}
	older := make(map[gpu.Ref][]gpuReading, len(keys))
	for _, r := range rows {
		k := gpu.Ref{Node: r.Node, Index: r.GPUIndex}
		lf, live := liveFrom[k]
		end := r.Start + int64(r.Step)
		if _, want := out[k]; !want || end <= start || (live && end > lf) {
			continue
		}
		older[k] = append(older[k], gpuReading{T: r.Start, Step: int64(r.Step), UtilPct: r.UtilAvgPct,
			MemUsedMiB: r.MemUsedAvgMiB, MemMiB: r.MemMiB})
	}
	for k, rs := range older {
		sort.SliceStable(rs, func(a, b int) bool { return rs[a].T < rs[b].T })
		out[k] = append(rs, out[k]...)
	}
	return out, nil
}

// runWindow is the span of j's current or last run: from its start to now
// while it runs, to its end once it ended; ok is false before any run.
func runWindow(j *models.Job, now time.Time) (from, to time.Time, ok bool) {
	start := j.LastStartAt
	if start == nil {
		start = j.StartedAt
	}
	if start == nil {
		return time.Time{}, time.Time{}, false
	}
	switch {
	case j.State == job.Running:
		to = now
	case j.FinishedAt != nil:
		to = *j.FinishedAt
	default:
		to = now
	}
	return *start, to, to.After(*start)
}

// detectIdle is the idle verdict on running job j from its GPUs'
// readings, under its team's terms: the one place that calls core/idle
// for the portal.
func (s *App) detectIdle(j *models.Job, terms IdleTerms, readings map[gpu.Ref][]gpuReading, now time.Time) *api.Idle {
	rule := terms.Rule
	if j.State != job.Running || !rule.Valid() {
		return nil
	}
	_, _, ok := runWindow(j, now)
	keys := placementKeys(j.Placement)
	if !ok || len(keys) == 0 {
		return nil
	}
	st := detectState(j, rule, readings, now)
	out := &api.Idle{Idle: st.Idle, Known: st.Known, AtLeast: st.Capped, AfterS: rule.After.Seconds(), BelowPct: rule.BelowPct}
	if !st.Since.IsZero() {
		since := st.Since
		out.Since = &since
	}
	if v := s.reclaimVerdict(j, st, terms, now); v.Action != idle.Leave {
		at := v.ReclaimAt
		out.ReclaimAt = &at
	}
	if j.KeepAliveUntil != nil && j.KeepAliveUntil.After(now) {
		until := *j.KeepAliveUntil
		out.KeepAliveUntil = &until
	}
	return out
}

// reclaimVerdict is what the reclaim loop does with running job j, whose
// idle state is st, under its team's terms, as of now.
func (s *App) reclaimVerdict(j *models.Job, st idle.State, terms IdleTerms, now time.Time) idle.Verdict {
	if s.cfg.ReclaimGrace <= 0 {
		return idle.Verdict{}
	}
	c := idle.Case{State: st, Session: j.IsSession()}
	if j.KeepAliveUntil != nil {
		c.KeepAliveUntil = *j.KeepAliveUntil
	}
	return idle.Decide(terms.Rule, terms.Policy, s.cfg.ReclaimGrace, c, now)
}

// detectState is core/idle's verdict on running job j under rule as of
// now, from its GPUs' readings.
func detectState(j *models.Job, rule idle.Rule, readings map[gpu.Ref][]gpuReading, now time.Time) idle.State {
	start, _, ok := runWindow(j, now)
	keys := placementKeys(j.Placement)
	if !ok || len(keys) == 0 {
		return idle.State{}
	}
	gpus := make([][]idle.Sample, len(keys))
	for i, k := range keys {
		for _, r := range readings[k] {
			gpus[i] = append(gpus[i], idle.Sample{T: time.Unix(r.T, 0), Step: time.Duration(r.Step) * time.Second, UtilPct: r.UtilPct})
		}
	}
	return idle.Detect(rule, start, now, gpus)
}

// idleCacheTTL is how long the lists (team, cluster, API lists) reuse a
// job's idle verdict: a verdict turns at most this late there, and a
// page of a thousand running jobs reads an hour of their GPUs' history
// at most once in this time, whoever asks. A job's own page and
// GET /api/v1/jobs/{id} judge afresh.
const idleCacheTTL = 10 * time.Second

// idleCache keeps the lists' idle verdicts a little while, per job run.
type idleCache struct {
	mu sync.Mutex
	m  map[int64]idleEntry
}

type idleEntry struct {
	run int64
	at  time.Time
	st  *api.Idle
}

// IdleStates is the idle verdict on each running job of js as of now,
// each under its team's terms: verdicts made within idleCacheTTL for the
// same run, and for the other jobs from one read of the teams and one of
// their GPUs' readings over the longest lookback of their rules.
func (s *App) IdleStates(ctx context.Context, js []*Job, now time.Time) (map[int64]*api.Idle, error) {
	rows := make([]*models.Job, len(js))
	for i, j := range js {
		rows[i] = &j.row
	}
	return s.idleStates(ctx, rows, now)
}

// idleStates is IdleStates for rows.
func (s *App) idleStates(ctx context.Context, js []*models.Job, now time.Time) (map[int64]*api.Idle, error) {
	out := make(map[int64]*api.Idle)
	s.idle.mu.Lock()
	var todo []*models.Job
	for _, j := range js {
		if j.State != job.Running {
			continue
		}
		if e, ok := s.idle.m[j.ID]; ok && e.run == j.Run && now.Sub(e.at) < idleCacheTTL && !now.Before(e.at) {
			if e.st != nil {
				out[j.ID] = e.st
			}
			continue
		}
		todo = append(todo, j)
	}
	s.idle.mu.Unlock()
	if len(todo) == 0 {
		return out, nil
	}
	terms, err := s.teamsIdleTerms(ctx)
	if err != nil {
		return nil, err
	}
	var keys []gpu.Ref
	from := now
	for _, j := range todo {
		rule := terms.of(j.Team).Rule
		start, _, ok := runWindow(j, now)
		if !ok || !rule.Valid() {
			continue
		}
		keys = append(keys, placementKeys(j.Placement)...)
		from = minTime(from, maxTime(start, now.Add(-rule.Lookback())))
	}
	var readings map[gpu.Ref][]gpuReading
	if len(keys) > 0 {
		if readings, err = s.gpuReadings(ctx, keys, from, now); err != nil {
			return nil, err
		}
	}
	s.idle.mu.Lock()
	defer s.idle.mu.Unlock()
	if s.idle.m == nil {
		s.idle.m = make(map[int64]idleEntry)
	}
	for id, e := range s.idle.m { // forget ended runs
		if now.Sub(e.at) > time.Minute {
			delete(s.idle.m, id)
		}
	}
	for _, j := range todo {
		st := s.detectIdle(j, terms.of(j.Team), readings, now)
		s.idle.m[j.ID] = idleEntry{run: j.Run, at: now, st: st}
		if st != nil {
			out[j.ID] = st
		}
	}
	return out, nil
}

// AddIdle fills in the idle verdict of the running jobs among out (which
// convert js, in the same order).
func (s *App) AddIdle(ctx context.Context, js []Job, out []api.Job, now time.Time) error {
	ptrs := make([]*models.Job, len(js))
	for i := range js {
		ptrs[i] = &js[i].row
	}
	st, err := s.idleStates(ctx, ptrs, now)
	if err != nil {
		return err
	}
	for i := range out {
		out[i].Idle = st[out[i].ID]
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// JobUsage is how j used its GPUs over its current or last run as of now;
// with points, the readings themselves, at most maxUsagePoints per GPU.
func (s *App) JobUsage(ctx context.Context, j *Job, now time.Time, points bool) (api.JobUsage, error) {
	return s.jobUsage(ctx, &j.row, now, points)
}

// jobUsage is JobUsage for a row.
func (s *App) jobUsage(ctx context.Context, j *models.Job, now time.Time, points bool) (api.JobUsage, error) {
	out := api.JobUsage{GPUs: []api.GPUUsage{}}
	from, to, ok := runWindow(j, now)
	keys := placementKeys(j.Placement)
	if !ok {
		return out, nil
	}
	out.From, out.To = from, to
	if len(keys) == 0 {
		return out, nil
	}
	readings, err := s.gpuReadings(ctx, keys, from, to)
	if err != nil {
		return out, err
	}
	uuids := make(map[gpu.Ref]string)
	simulated := make(map[gpu.Ref]bool)
	for _, g := range s.ConnectedGPUs() {
		uuids[g.Key] = g.Device.UUID
		simulated[g.Key] = gpu.Simulated(g.Device)
	}
	running := j.State == job.Running
	var utilSum, utilW float64
	for _, k := range keys {
		rs := readings[k]
		g := api.GPUUsage{Node: k.Node, Index: k.Index, UUID: uuids[k], Shared: j.Sharing, Simulated: simulated[k]}
		others := map[int64]bool{}
		var sum, w float64
		for _, r := range rs {
			sum += r.UtilPct * float64(r.Step)
			w += float64(r.Step)
			g.MemMiB = max(g.MemMiB, r.MemMiB)
			// A neighbour counts only in a reading that lists the job
			// too: the second a job starts, its GPU's reading may still
			// list the job that just ended there.
			mine := false
			for _, jm := range r.Jobs {
				if jm.JobID == j.ID {
					mine = true
					if g.JobMemMaxMiB == nil || jm.MemMiB > *g.JobMemMaxMiB {
						m := jm.MemMiB
						g.JobMemMaxMiB = &m
					}
				}
			}
			for _, jm := range r.Jobs {
				if mine && jm.JobID != j.ID {
					others[jm.JobID] = true
				}
			}
		}
		if w > 0 {
			avg := sum / w
			g.UtilAvgPct = &avg
			utilSum, utilW = utilSum+sum, utilW+w
		}
		if n := len(rs); n > 0 && running && now.Unix()-(rs[n-1].T+rs[n-1].Step) <= int64(idle.MaxGap/time.Second) {
			last := rs[n-1]
			u := last.UtilPct
			g.UtilPct, g.MemUsedMiB = &u, int64(last.MemUsedMiB+0.5)
			if m, ok := jobMemIn(last.Jobs, j.ID); ok {
				g.JobMemMiB = &m
			}
		}
		for id := range others {
			g.SharedWith = append(g.SharedWith, id)
		}
		sort.Slice(g.SharedWith, func(a, b int) bool { return g.SharedWith[a] < g.SharedWith[b] })
		g.Shared = g.Shared || len(g.SharedWith) > 0
		if !g.Shared && g.JobMemMiB == nil && g.UtilPct != nil {
			// Alone on its GPU, the job's memory is the GPU's.
			m := g.MemUsedMiB
			g.JobMemMiB = &m
		}
		if points {
			g.Points = usagePoints(j.ID, rs, from.Unix(), to.Unix(), g.Shared)
		}
		out.GPUs = append(out.GPUs, g)
	}
	if utilW > 0 {
		avg := utilSum / utilW
		out.UtilAvgPct = &avg
	}
	if running {
		out.Idle = s.detectIdle(j, s.IdleTermsOf(ctx, j.Team), readings, now)
	}
	return out, nil
}

// usagePoints folds one GPU's readings over [from, to] into at most
// maxUsagePoints points of equal step; the job's own memory is in a point
// where every reading folded into it knew it (or the GPU is the job's
// alone).
func usagePoints(id int64, rs []gpuReading, from, to int64, shared bool) []api.UsagePoint {
	step := int64(1)
	for _, s := range []int64{1, 5, 10, 30, 60, 300, 600, 1800, 3600, 6 * 3600, 86400} {
		step = s
		if (to-from)/s < maxUsagePoints {
			break
		}
	}
	type acc struct {
		util, mem, w   float64
		jobMem, jobW   float64
		jobUnknownSeen bool
	}
	buckets := map[int64]*acc{}
	var order []int64
	for _, r := range rs {
		b := r.T - r.T%step
		a := buckets[b]
		if a == nil {
			a = &acc{}
			buckets[b] = a
			order = append(order, b)
		}
		w := float64(r.Step)
		a.util += r.UtilPct * w
		a.mem += r.MemUsedMiB * w
		a.w += w
		own, counted := jobMemIn(r.Jobs, id)
		switch {
		case r.Live && counted:
			a.jobMem += float64(own) * w
			a.jobW += w
		case !shared:
			// No machine counted the job's own memory (the GPU's history,
			// a back end without per-process readings): alone on its GPU,
			// the job's is the GPU's.
			a.jobMem += r.MemUsedMiB * w
			a.jobW += w
		case r.Live:
			a.jobW += w // on a shared GPU, no entry: none of its memory
		default:
			a.jobUnknownSeen = true
		}
	}
	sort.Slice(order, func(a, b int) bool { return order[a] < order[b] })
	out := make([]api.UsagePoint, 0, len(order))
	for _, b := range order {
		a := buckets[b]
		p := api.UsagePoint{T: b, Step: step, UtilPct: a.util / a.w, MemUsedMiB: int64(a.mem/a.w + 0.5)}
		if a.jobW > 0 && !a.jobUnknownSeen {
			m := int64(a.jobMem/a.jobW + 0.5)
			p.JobMemMiB = &m
		}
		out = append(out, p)
	}
	return out
}

// Readings are the live GPU readings of the telemetry window;
// *telemetry.Recorder is one.
type Readings interface {
	// GPU returns GPU k's readings since since (Unix seconds), oldest
	// first.
	GPU(k gpu.Ref, since int64) []telemetry.Point
}

// noReadings is the Readings of a server without telemetry.
type noReadings struct{}

func (noReadings) GPU(gpu.Ref, int64) []telemetry.Point { return nil }

// UsageStore is what a job's use of its GPUs reads of the store: the
// minute and hour rows of the GPUs' history before the live window.
type UsageStore interface {
	GPUHistoryOnNodes(ctx context.Context, nodes []string, from, to int64) ([]models.GPUHistory, error)
}

// ConnectedGPU is a GPU of a connected machine.
type ConnectedGPU struct {
	Key    gpu.Ref
	Device gpu.Device
}

// ConnectedGPUs lists the GPUs of the connected machines, by node and
// index.
func (s *App) ConnectedGPUs() []ConnectedGPU {
	var out []ConnectedGPU
	for _, n := range s.cfg.Engine.Nodes() {
		for _, d := range n.Devices() {
			out = append(out, ConnectedGPU{Key: gpu.Ref{Node: n.Name(), Index: d.Index}, Device: d})
		}
	}
	return out
}

// teamsIdle are every team's idle terms, read at once.
type teamsIdle struct {
	byTeam map[string]IdleTerms
	def    IdleTerms
}

// of is team's terms; the default ones for a team not read.
func (ts teamsIdle) of(team string) IdleTerms {
	if t, ok := ts.byTeam[team]; ok {
		return t
	}
	return ts.def
}

// teamsIdleTerms reads every team's idle terms, for a list or a reclaim
// pass that judges many jobs.
func (s *App) teamsIdleTerms(ctx context.Context) (teamsIdle, error) {
	byTeam, err := s.AllIdleTerms(ctx)
	if err != nil {
		return teamsIdle{}, err
	}
	return teamsIdle{byTeam: byTeam, def: s.DefaultIdleTerms()}, nil
}

// Reclaimed is what one reclaim gave back: the job's team and the
// GPU-seconds (its GPUs times how long they had been idle).
type Reclaimed struct {
	Team       string
	GPUSeconds float64
}

// ReclaimPass judges every running job afresh under its team's terms
// (core/idle Detect, then Decide with Config.ReclaimGrace), warns the
// owners of those due to be reclaimed and reclaims those due now
// (reclaimIdle); it returns what it gave back. The leader runs it.
func (s *App) ReclaimPass(ctx context.Context, now time.Time) ([]Reclaimed, error) {
	if s.cfg.ReclaimGrace <= 0 {
		return nil, nil
	}
	js, err := s.runningJobs(ctx)
	if err != nil || len(js) == 0 {
		return nil, err
	}
	terms, err := s.teamsIdleTerms(ctx)
	if err != nil {
		return nil, err
	}
	var out []Reclaimed
	for i := range js {
		j := &js[i]
		t := terms.of(j.Team)
		if j.State != job.Running || !t.Rule.Valid() || !t.Policy.Reclaims(j.IsSession()) {
			continue
		}
		start, _, ok := runWindow(j, now)
		if !ok {
			continue
		}
		from := maxTime(start, now.Add(-t.Rule.Lookback()))
		readings, err := s.gpuReadings(ctx, placementKeys(j.Placement), from, now)
		if err != nil {
			return out, fmt.Errorf("job %d readings: %w", j.ID, err)
		}
		st := detectState(j, t.Rule, readings, now)
		v := s.reclaimVerdict(j, st, t, now)
		if v.Action == idle.Warn {
			if err := s.warnIdle(ctx, j, v.ReclaimAt, now); err != nil {
				return out, err
			}
		}
		if v.Action != idle.Reclaim {
			continue
		}
		gpuSeconds, ok, err := s.reclaimIdle(ctx, j, st.Since, now)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, Reclaimed{Team: j.Team, GPUSeconds: gpuSeconds})
		}
	}
	return out, nil
}

// Reclaims reports whether the server reclaims idle jobs at all (a
// reclaim grace is set).
func (s *App) Reclaims() bool { return s.cfg.ReclaimGrace > 0 }

// ReclaimGrace is how long an idle job is warned before it is reclaimed;
// 0: never.
func (s *App) ReclaimGrace() time.Duration { return s.cfg.ReclaimGrace }

// GPUByUUID finds a connected GPU.
func (s *App) GPUByUUID(uuid string) (ConnectedGPU, bool) {
	for _, g := range s.ConnectedGPUs() {
		if g.Device.UUID == uuid {
			return g, true
		}
	}
	return ConnectedGPU{}, false
}
