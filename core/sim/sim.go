// Package sim replays a job trace through the scheduling core on a
// virtual clock and measures how each policy does.
//
// The simulator is event driven: it jumps from one event to the next
// (a job arriving, a job finishing, or the time the scheduler asked to be
// called again, Decisions.Recheck, when a running job crosses a queue
// threshold or a waiting job is due for promotion) and runs a scheduling
// pass only when something changed. It drives the same sched.Scheduler as
// the live engine, with the same Snapshot and Decisions.
package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/salussim"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/core/usage"
)

// Config is the setup of one simulation.
type Config struct {
	// Sched is the scheduler's configuration: policy and knobs.
	Sched sched.Config
	// Nodes is the simulated cluster.
	Nodes []trace.Node
	// PreemptCostS is the run time a preempted job loses to checkpoint
	// and restore: each resumption first runs this long, holding its GPUs,
	// before the job makes progress again. 0 matches the Tiresias
	// simulator.
	PreemptCostS float64
	// HandoverS is how long a preempted job keeps its GPUs after the
	// preemption (its checkpoint and exit, up to the agents' grace
	// period): a job placed on them starts once they are free, as in the
	// live engine (handover.go). 0 matches the Tiresias simulator.
	HandoverS float64
	// PassEveryS, when positive, runs a pass at least this often (virtual
	// seconds) while jobs wait and something runs or is still to arrive,
	// as the live engine passes every Interval (serve's default: one
	// second) when nothing happens. 0 passes only at arrivals,
	// completions and the scheduler's rechecks, as the Tiresias
	// simulator does: what differs is what changes with time alone, such
	// as fair share's usage, whose decay asks for no recheck.
	PassEveryS float64

	// Teams are the teams the jobs name (trace.Job.Team), with their
	// guarantees and weights. With teams, the scheduler applies fair share
	// (docs/fair-share.md), with each team's usage decayed by HalfLifeS,
	// and the result reports every team. Sched.MinRuntimeS sets the
	// minimum runtime before a reclaim.
	Teams []trace.Team
	// NoFairShare hides the teams from the scheduler, which then schedules
	// as without them; the result still reports every team, to compare.
	NoFairShare bool
	// HalfLifeS is the half-life of team usage in seconds; 0 means
	// sched.DefaultHalfLifeS (7 days), negative means no decay.
	HalfLifeS float64

	// Sharing is salussim.SharingNone (also "") or SharingSalus: under
	// salus, fractional jobs share GPUs (see share.go, docs/salus.md).
	Sharing salussim.Sharing
	// LanePolicy picks which job of a shared lane runs: lanes.Pack (also
	// ""), Fair or SRTF, as the agent's --lane-policy does (share.go).
	LanePolicy lanes.Policy

	// LimitFactor, when positive, hides durations from the scheduler
	// (sched.Job.DurationS is 0) and gives every job that declares no
	// time limit (trace.Job.TimeLimitS) one of its duration times
	// LimitFactor: it knows only the limits, as the live server knows a
	// command job's. With sched.Config's
	// LimitsAsHints, srtf and srsf rank by them (docs/scheduling.md,
	// "Declared time limits as hints").
	LimitFactor float64
	// LimitSpread, with LimitFactor, draws each job's factor from 1 to
	// LimitFactor instead, log-uniformly by a hash of its ID (the same
	// every run): users overestimate by different amounts, which a
	// single factor, keeping the order of the jobs' limits that of their
	// durations, does not show.
	LimitSpread bool

	// LearnPrior learns tiresias-g's distribution as the run goes, as the
	// live engine does (sched.GPUTimeLearner): from the shipped prior plus
	// Sched.GPUTimeSamples, each finished job's GPU-time (attained
	// service), and the service of the jobs not yet finished as lower
	// bounds of theirs. Without it the distribution is the prior plus
	// Sched.GPUTimeSamples for the whole run, as in the Tiresias
	// reference.
	LearnPrior bool

	// Observer, when set, is told of every pass, start and finish, so
	// that a caller can watch the run unfold (core/forecast/replay
	// forecasts starts at each arrival and checks them).
	Observer Observer
}

// Observer watches a simulation. Its methods run on the simulator's
// goroutine, in virtual-time order.
type Observer interface {
	// Pass is called before each pass's decisions are applied, with the
	// snapshot the scheduler saw and what it decided (without
	// Allocations or the reasons of preemptions and queue changes, which
	// the simulator does not ask for); the observer
	// must not keep either after it returns.
	Pass(s sched.Snapshot, d sched.Decisions)
	// Started is called when a job starts a run, its first or a later one.
	Started(id int64, at float64)
	// Finished is called when a job finishes, with the time it ran in all.
	Finished(id int64, at, executedS float64)
}

// Run simulates jobs under cfg and returns the outcome. It refuses a job
// with a negative or infinite time, and one that needs more GPUs than the
// whole cluster has, since no policy could ever run it; and it stops at a
// scheduler decision that breaks the rules (starting a job twice, using a
// GPU twice), which is a bug in the scheduler.
func Run(ctx context.Context, jobs []trace.Job, cfg Config) (*Result, error) {
	began := time.Now()
	s, err := newSimulator(jobs, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.loop(ctx); err != nil {
		return nil, fmt.Errorf("simulate %s: %w", cfg.Sched.Policy, err)
	}
	r := s.result()
	r.WallS = time.Since(began).Seconds()
	return r, nil
}

// Compare runs the same jobs under each policy in turn, with the rest of
// cfg unchanged.
func Compare(ctx context.Context, jobs []trace.Job, cfg Config, policies []string) ([]*Result, error) {
	out := make([]*Result, 0, len(policies))
	for _, p := range policies {
		c := cfg
		c.Sched.Policy, c.Sched.Rule = SplitCandidate(p)
		r, err := Run(ctx, jobs, c)
		if err != nil {
			return nil, err
		}
		r.Policy = CandidateLabel(c.Sched.Policy, r.Rule)
		out = append(out, r)
	}
	return out, nil
}

// SplitCandidate reads a candidate to compare: a policy name, or
// "policy:rule" for one of the policy's rules (sched.PolicyRules).
func SplitCandidate(s string) (policy, rule string) {
	policy, rule, _ = strings.Cut(s, ":")
	return policy, rule
}

// CandidateLabel names a run in reports: the policy, with ":rule" when
// the rule is not the policy's default.
func CandidateLabel(policy, rule string) string {
	if rules := sched.PolicyRules(policy); len(rules) > 0 && rule != rules[0] {
		return policy + ":" + rule
	}
	return policy
}

// scheduler is what the simulator needs of sched.Scheduler; tests put a
// misbehaving one in its place.
type scheduler interface {
	Schedule(sched.Snapshot) sched.Decisions
}

// simulator holds one run's state.
type simulator struct {
	cfg Config
	// learner learns the Gittins distribution (Config.LearnPrior).
	learner *sched.GPUTimeLearner
	sc      scheduler
	rule    string // the policy's rule (sched.Scheduler.Rule)
	nodes   []sched.Node
	gpus    gpuPool

	jobs    []job // in arrival order
	byID    jobIndex
	arrived int // jobs[:arrived] have arrived

	// active are the arrived, unfinished jobs in arrival order, and snap
	// their scheduler view, index for index. Finished jobs are dropped
	// lazily, before the next pass.
	active   []*job
	snap     []sched.Job
	finished int // jobs done since the last compaction
	running  []*job

	ends     completions
	recheck  float64 // when the scheduler asked to be called again; 0: never
	lastPass float64 // when the last pass ran (Config.PassEveryS)
	now      float64

	passes      int
	preemptions int
	briefRuns   int     // preemptions of runs shorter than BriefRunS
	busy        float64 // GPU-seconds held, restores included
	occupied    float64 // GPU-seconds during which a GPU hosts a job
	done        int
	share       *shareState // nil without sharing

	releases     []release         // preempted jobs' GPUs not yet handed over (handover.go)
	waitingSince map[int64]float64 // jobs kept back by a handover, since when
	promised     sched.Promises    // their starts, made once the GPUs are handed over (handover.go)
	handovers    int
	handoverS    float64

	// reservations are the last pass's, handed back to the next
	// (sched.Snapshot.Reservations), as the engine does.
	reservations []sched.Reservation

	teams *teams    // nil without Config.Teams
	cpu   *cpuState // nil unless Config.Sched.CPUAlloc is set

	// Preemptions of sessions, and those of them that were reclaims.
	sessionPreempts, sessionReclaims int
}

func newSimulator(jobs []trace.Job, cfg Config) (*simulator, error) {
	if f := cfg.LimitFactor; f != 0 && !(f >= 1 && !math.IsInf(f, 1)) {
		return nil, fmt.Errorf("limit factor %v: want 1 or more (a limit below the duration would stop the job), or 0 for none", f)
	}
	if cfg.PreemptCostS < 0 || math.IsNaN(cfg.PreemptCostS) || math.IsInf(cfg.PreemptCostS, 0) {
		return nil, fmt.Errorf("preempt cost %v s: want a finite number of seconds, 0 or more", cfg.PreemptCostS)
	}
	if cfg.HandoverS < 0 || math.IsNaN(cfg.HandoverS) || math.IsInf(cfg.HandoverS, 0) {
		return nil, fmt.Errorf("handover %v s: want a finite number of seconds, 0 or more", cfg.HandoverS)
	}
	if math.IsNaN(cfg.HalfLifeS) || math.IsInf(cfg.HalfLifeS, 0) {
		return nil, fmt.Errorf("usage half-life %v s: want a finite number of seconds", cfg.HalfLifeS)
	}
	// The simulator never reads Decisions.Allocations (it models CPUs
	// itself, from the placements: cpualloc.go) nor the reasons of
	// preemptions and queue changes, and it is done with a pass's
	// decisions before the next (an Observer too: Observer.Pass).
	sconf := cfg.Sched
	sconf.OmitAllocations = true
	sconf.OmitReasons = true
	sconf.ReuseDecisions = true // pass applies them before the next
	// Its placements are the scheduler's own (Start.GPUs), never written.
	sconf.StablePlacements = true
	if sconf.HandoverS == 0 {
		// A reservation past its deadline takes its GPUs a handover
		// early, so that its job starts by the deadline.
		sconf.HandoverS = cfg.HandoverS
	}
	sc, err := sched.New(sconf)
	if err != nil {
		return nil, err
	}
	s := &simulator{cfg: cfg, sc: sc, rule: sc.Rule(), waitingSince: make(map[int64]float64), promised: make(sched.Promises)}
	if cfg.LearnPrior {
		s.learner = sched.NewGPUTimeLearner(cfg.Sched.GPUTimeSamples)
	}
	s.nodes, s.gpus = buildCluster(cfg.Nodes)
	if s.gpus.total == 0 {
		return nil, fmt.Errorf("the cluster has no GPUs")
	}
	if s.share, err = newShareState(cfg, s.nodes); err != nil {
		return nil, err
	}
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	// Arrival order: by submit time, then as in the trace (mostly that
	// already).
	bySubmit := func(a, b int) int {
		switch {
		case jobs[a].Submit < jobs[b].Submit:
			return -1
		case jobs[a].Submit > jobs[b].Submit:
			return 1
		}
		return 0
	}
	if !slices.IsSortedFunc(order, bySubmit) {
		slices.SortStableFunc(order, bySubmit)
	}
	s.jobs = make([]job, len(jobs))
	s.byID = newJobIndex(jobs)
	for k, i := range order {
		tj := &jobs[i]
		if !(tj.Submit >= 0 && tj.Duration >= 0) || math.IsInf(tj.Submit, 1) || math.IsInf(tj.Duration, 1) {
			return nil, fmt.Errorf("job %d: submit %v s, duration %v s: want finite times, 0 or more", tj.ID, tj.Submit, tj.Duration)
		}
		if tj.GPUs < 1 || tj.GPUs > s.gpus.total {
			return nil, fmt.Errorf("job %d needs %d GPUs; the cluster has %d", tj.ID, tj.GPUs, s.gpus.total)
		}
		if s.byID.get(tj.ID) != nil {
			return nil, fmt.Errorf("job id %d appears twice", tj.ID)
		}
		class, err := jobClass(tj.Class)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", tj.ID, err)
		}
		s.jobs[k] = job{tj: tj, order: k, pos: -1, within: -1, class: class}
		s.byID.put(tj.ID, &s.jobs[k])
	}
	s.teams = newTeams(cfg, s.jobs)
	if err := s.modelCPUs(); err != nil {
		return nil, err
	}
	return s, nil
}

// loop runs events until none is left.
func (s *simulator) loop(ctx context.Context) error {
	for step := 0; ; step++ {
		if step%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		t, ok := s.nextTime()
		if !ok {
			return nil
		}
		if s.teams != nil {
			s.teams.advance(t, s.active)
		}
		s.occupied += float64(s.gpus.total-s.gpus.free) * (t - s.now)
		s.now = t
		if s.cpu != nil {
			s.cpu.advance(t, s.running)
		}
		// A pass can start jobs only if some wait; a completion therefore
		// needs one only then. An arrival always waits, and a recheck is
		// due because the scheduler asked for it (a running job crossing
		// a queue threshold must be demoted at that time, since the
		// order within a queue is by entry time).
		need := false
		for c, ok := s.ends.next(); ok && c.at <= t; c, ok = s.ends.next() {
			s.ends.pop()
			if c.lane != nil {
				s.shareRetime(c.lane) // turns change in a fair lane
				continue
			}
			s.complete(c.job)
			need = true
		}
		need = need && s.pending() > 0
		for s.arrived < len(s.jobs) && s.jobs[s.arrived].tj.Submit <= t {
			s.arrive(&s.jobs[s.arrived])
			s.arrived++
			need = true
		}
		if s.recheck > 0 && s.recheck <= t {
			s.recheck = 0
			need = need || s.unfinished() > 0
		}
		if len(s.releases) > 0 && s.releaseDue() {
			need = need || s.pending() > 0
		}
		if p, ok := s.periodicPass(); ok && p <= t {
			need = true
		}
		if need {
			if err := s.pass(); err != nil {
				return err
			}
		}
		s.applySpeeds()
	}
}

// nextTime is the time of the next event: arrival, completion or recheck.
func (s *simulator) nextTime() (float64, bool) {
	t, ok := math.Inf(1), false
	if s.arrived < len(s.jobs) {
		t, ok = s.jobs[s.arrived].tj.Submit, true
	}
	if c, has := s.ends.next(); has && c.at < t {
		t, ok = c.at, true
	}
	if s.recheck > 0 && s.recheck < t {
		t, ok = s.recheck, true
	}
	if r := s.nextRelease(); r < t {
		t, ok = r, true
	}
	if p, has := s.periodicPass(); has && p < t {
		t, ok = p, true
	}
	return t, ok
}

// periodicPass is when the next pass is due by Config.PassEveryS: while
// jobs wait and some job runs or is still to arrive (a wait that
// nothing can end would otherwise pass for ever).
func (s *simulator) periodicPass() (float64, bool) {
	if s.cfg.PassEveryS <= 0 || s.pending() == 0 || len(s.running) == 0 && s.arrived == len(s.jobs) {
		return 0, false
	}
	return s.lastPass + s.cfg.PassEveryS, true
}

// pending counts the arrived jobs that wait for GPUs.
func (s *simulator) pending() int {
	return len(s.active) - s.finished - len(s.running)
}

// unfinished counts the arrived jobs not yet done.
func (s *simulator) unfinished() int { return len(s.active) - s.finished }

// arrive adds a job to the active set, pending.
func (s *simulator) arrive(j *job) {
	tj := j.tj
	j.pos = len(s.active)
	s.active = append(s.active, j)
	if s.teams != nil {
		s.teams.t[j.team].pending += tj.GPUs
	}
	s.snap = append(s.snap, sched.Job{
		ID:         tj.ID,
		Team:       tj.Team,
		User:       tj.User,
		GPUs:       tj.GPUs,
		GPUMemMiB:  tj.GPUMemMiB,
		SubmitTime: tj.Submit,
		State:      sched.Pending,
		DurationS:  tj.Duration,
		TimeLimitS: tj.TimeLimitS,
		Model:      tj.Model,
		Class:      j.class,
	})
	if f := s.cfg.LimitFactor; f > 0 {
		if s.cfg.LimitSpread {
			f = math.Pow(f, trace.UnitHash(tj.ID))
		}
		sj := &s.snap[len(s.snap)-1]
		sj.DurationS = 0
		if sj.TimeLimitS == 0 {
			sj.TimeLimitS = tj.Duration * f
		}
	}
	s.shareJob(j, &s.snap[len(s.snap)-1])
	if s.cpu != nil {
		sj := &s.snap[len(s.snap)-1]
		sj.CPUProfile, sj.CPUProfileSource = &j.cpu.profile, j.cpu.profileSrc
	}
}

// complete ends a running job at s.now.
func (s *simulator) complete(j *job) {
	s.stopRun(j)
	j.done = true
	j.finish = s.now
	s.finished++
	s.done++
	if s.learner != nil {
		s.learner.Completed(j.service)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Finished(j.tj.ID, s.now, j.executed)
	}
}

// stopRun closes the job's current run at s.now and frees its GPUs.
func (s *simulator) stopRun(j *job) {
	ran := s.now - j.runStart
	j.account(ran)
	s.busy += float64(j.tj.GPUs) * ran
	s.gpus.release(j.tj.GPUs, j.gpus)
	s.shareStop(j)
	if s.cpu != nil {
		s.cpu.place(j, j.gpus, false)
	}
	if s.teams != nil {
		s.teams.t[j.team].held -= j.tj.GPUs
	}
	j.gpus = nil
	j.running = false
	last := s.running[len(s.running)-1]
	s.running[j.runIdx] = last
	last.runIdx = j.runIdx
	s.running = s.running[:len(s.running)-1]
	sj := &s.snap[j.pos]
	sj.State = sched.Pending
	sj.Placement = nil
	sj.ExecutedS = j.executed
	sj.AttainedService = j.service
	sj.HeldGPUs = 0
}

// startRun starts or resumes a job at s.now on gpus.
func (s *simulator) startRun(j *job, gpus []gpu.Ref) {
	j.running = true
	j.run++
	j.runStart = s.now
	j.acc = usage.Whole(j.tj.GPUs)
	if s.teams != nil {
		st := &s.teams.t[j.team]
		st.held += j.tj.GPUs
		st.pending -= j.tj.GPUs
		j.within = -1
	}
	j.gpus = gpus
	if s.cpu != nil {
		s.cpu.place(j, gpus, true)
	}
	j.runIdx = len(s.running)
	s.running = append(s.running, j)
	sj := &s.snap[j.pos]
	sj.State = sched.Running
	sj.Placement = gpus
	sj.LastStartTime = s.now
	s.ends.push(completion{at: s.now + j.remaining(), job: j, run: j.run})
}

// compact drops finished jobs from the active list and the snapshot,
// keeping arrival order.
func (s *simulator) compact() {
	if s.finished == 0 {
		return
	}
	k := 0
	for i, j := range s.active {
		if j.done {
			j.pos = -1
			continue
		}
		if k != i {
			s.active[k] = j
			s.snap[k] = s.snap[i]
			j.pos = k
		}
		k++
	}
	clear(s.snap[k:])
	s.active = s.active[:k]
	s.snap = s.snap[:k]
	s.finished = 0
}
