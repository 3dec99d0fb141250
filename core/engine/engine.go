// Package engine is the loop between the store, the scheduling core and
// the machines: it builds a snapshot of the cluster, asks the scheduler
// what to do, and applies the decisions: starting, preempting and
// cancelling jobs on node agents and recording every change in the store.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/usage"
)

// Job is what the engine needs to know of one unfinished job.
type Job struct {
	ID              int64
	Team, User      string
	GPUs            int
	GPUMemMiB       int64
	Command         []string
	SimDuration     float64  // seconds; for simulated jobs
	SimUtilPct      *float64 // a simulated job's GPU utilization; nil: a training job's
	State           job.State
	Run             int64 // the current or last run's number (job.RunRef)
	SubmittedAt     time.Time
	Placement       []gpu.Ref // the GPUs held while running
	LastStartAt     *time.Time
	ExecutedS       float64
	AttainedService float64 // over the ended runs
	// Accrual is how the run in progress attains service: a shared GPU
	// counts by the job's share of it, which changes as jobs join and
	// leave it (held.go).
	Accrual  usage.Accrual
	Model    string
	Queue    sched.QueueState
	Failures int        // failed runs retried so far
	ExitCode *int       // of the last run that ended
	RetryAt  *time.Time // a failed job waits until then
	// CancelRequest is the reason of a cancel asked through a replica
	// that does not schedule (replicas.go); empty when none.
	CancelRequest string
	// Stop is this engine's or an earlier one's request that the job's
	// run Stop.Run stop, as the store keeps it (stoprequest.go); nil when
	// none.
	Stop *job.StopRequest
	// Sharing, GPUFraction and Memory: see sharing.go.
	Sharing     bool
	GPUFraction float64         // in (0, 1) when the job asked for a fraction of a GPU
	Memory      memest.Estimate // unpadded; zero when unknown
	// BatchSize is the batch size the user declared, 0 when unknown: with
	// Model it keys the measured CPU profiles (alloc.go).
	BatchSize int
	// CPUProfile is the sensitivity profile the user declared, nil when
	// none: it comes before learned and catalogue profiles, and a job
	// with one is never profiled (alloc.go).
	CPUProfile *synergy.Profile
	// Env and Dir are the job's own variables and the folder it starts
	// in (job.Spec).
	Env []string
	Dir string
	// TimeLimit bounds the time the job runs over all its runs; 0: none
	// (timelimit.go).
	TimeLimit time.Duration
	// Retries is how many times a run that fails on its own is started
	// again, as the job asked (retry.go).
	Retries int
	// Deps are the jobs it waits for, with their states now (gates.go).
	Deps []Dep
	// Array is the task of an array the job is, nil when none;
	// ArrayLimit how many of the array's tasks may run at once (0: no
	// limit; gates.go).
	Array      *job.ArrayTask
	ArrayLimit int
	// Account is the Unix account of the job's owner, which machines run
	// it as (job.Spec.Account; accounts.go); empty when not known.
	Account string
	// Image is the container image the job's command runs in; empty: on
	// the machine (job.Spec.Image).
	Image string
	// Session makes the job an interactive session (job.Session); nil: a
	// batch job.
	Session *job.Session
	// ReenteredAt is when the job went to the back of its queue after
	// its idle GPUs were reclaimed (sched.Job.ReenteredAt); nil: never.
	ReenteredAt *time.Time
	// InteractivePriority: a session that asked to go ahead of its
	// team's other waiting jobs (sched.Job.Interactive).
	InteractivePriority bool
	// Priority is a batch job's priority within its team: job.PriorityHigh,
	// job.PriorityLow, or "" for normal (sched.ClassHigh, sched.ClassLow).
	Priority string
	// Name is the job's name (job.Spec.Name).
	Name string
	// TasksPerGPU starts one process per GPU instead of one per machine
	// (job.Gang.TasksPerGPU; gang.go).
	TasksPerGPU bool
}

// Dep is a job's dependency on another, and the other's state as the
// store read it: "" when the store does not know that job.
type Dep struct {
	job.Dependency
	State job.State
}

// Store is where the engine reads jobs and records what happens to them.
// Every change is committed before the engine acts on it.
//
// A store has every method: the engine asserts none of them, so a store
// that lacks one does not compile (enginestore.Store is the real one).
// The methods below are the jobs' and their runs'; the embedded
// interfaces group the rest by the feature that needs them, each
// documented where that feature lives.
type Store interface {
	// UnfinishedEngineJobs returns the unfinished jobs a pass acts on,
	// with their dependencies' states and cancel requests; held jobs are
	// left out unless a cancel of theirs was requested. The pass may
	// change the jobs it is given; they are its own until its next call,
	// which may reuse their array.
	UnfinishedEngineJobs(ctx context.Context) ([]Job, error)
	// MarkStarted records a new run of a waiting job on placement and
	// returns its number.
	MarkStarted(ctx context.Context, id int64, placement []gpu.Ref, now time.Time) (run int64, err error)
	// MarkStopped records how run ref ended; for a run that is not the
	// job's current one it changes nothing and returns an error wrapping
	// job.ErrConflict, as the other changes of a run do. Handover is the
	// service the run attained after it was asked to stop (run.handover),
	// which the queues do not count: the store adds it to the job's
	// CycleService and CycleExecuted (sched.QueueState).
	MarkStopped(ctx context.Context, ref job.RunRef, to job.State, exitCode *int, reason string, handover usage.Service, now time.Time) error
	// MarkResumed puts a job that waits again back to running as its last
	// run ref, which its machine came back still running, and returns the
	// time the run's time counts from: when its record ended (the run
	// never stopped), or now.
	MarkResumed(ctx context.Context, ref job.RunRef, placement []gpu.Ref, reason string, now time.Time) (time.Time, error)
	// Cancel ends an unfinished job that is not running, cancelled for
	// reason; a running one is stopped first and passed to MarkStopped.
	Cancel(ctx context.Context, id int64, reason string, now time.Time) error
	// EndWaiting ends a job that waits, in final state to: cancelled
	// when a job it depends on ended the wrong way, timed out when its
	// time is used up (gates.go).
	EndWaiting(ctx context.Context, id int64, to job.State, reason string, now time.Time) error
	// SetReasons records why waiting jobs wait, by job; jobs no longer
	// waiting are left alone.
	SetReasons(ctx context.Context, reasons map[int64]string) error
	// SetQueueStates records the queue state the scheduler handed back
	// for each job, so that the next pass (and the next server) sees it.
	SetQueueStates(ctx context.Context, states map[int64]sched.QueueState) error
	// MarkRetry records that run ref failed with exitCode and puts the
	// job back in the queue to start again no earlier than retryAt.
	MarkRetry(ctx context.Context, ref job.RunRef, exitCode int, reason string, retryAt, now time.Time) error
	// MarkRequeued puts a running job back in the queue with a new memory
	// estimate, without counting a failure: it outgrew its Salus lane. It
	// applies rq.Outcome to the estimate the run started from and the
	// job's stalls so far, and returns it (sharing.go).
	MarkRequeued(ctx context.Context, ref job.RunRef, rq job.Requeue) (job.RequeueOutcome, error)
	// SetHeld records the changes of the GPUs running jobs hold, a shared
	// GPU counted by each job's share of it (held.go); a change for a run
	// that has ended changes nothing.
	SetHeld(ctx context.Context, changes []Held) error
	// SetMeasuredMemory stores a sharing job's estimate as its run
	// measured it, for its next run; it changes nothing else.
	SetMeasuredMemory(ctx context.Context, id int64, est memest.Estimate) error

	// StartsRecorder records a pass's starts in one call (pass.go).
	StartsRecorder
	// StopRecorder keeps the requests to stop runs across restarts
	// (stoprequest.go).
	StopRecorder
	// CancelRequester records a follower replica's cancel of a running
	// job for the leader (replicas.go).
	CancelRequester
	// TeamStore and UserUsageStore keep the teams and their users'
	// usage, for fair share (teams.go, userusage.go).
	TeamStore
	UserUsageStore
	// NodeStateStore keeps the machines' cordons, drains and GPUs out
	// of service across restarts and replicas (nodestate.go).
	NodeStateStore
	// ReservationStore keeps the last pass's reservations across
	// restarts and replicas (reserve.go).
	ReservationStore
	// ForecastStore and LatestForecastStore feed and keep the start
	// forecasts (forecast.go).
	ForecastStore
	LatestForecastStore
	// ProfileStore and JobNoter keep the measured CPU profiles and note
	// unenforced CPU limits in a job's history (alloc.go).
	ProfileStore
	JobNoter
}

// Node is one machine's agent as the engine drives it: in-process for
// simulated and local GPUs, or remote over the network.
type Node interface {
	Name() string
	Devices() []gpu.Device
	Resources() (cpus int, memMiB int64)
	// Start starts run s.Run of a job; Stop stops a run, and no other run
	// of the job. Running lists the runs that have not exited.
	Start(ctx context.Context, s job.Spec) error
	Stop(ctx context.Context, ref job.RunRef) error
	Running() []job.RunRef
	Sample(now time.Time) []gpu.Sample
}

// ErrNotFound is returned for a job the store does not know.
var ErrNotFound = errors.New("job not found")

// Config sets up an Engine.
type Config struct {
	Store     Store
	Scheduler *sched.Scheduler
	Logger    *slog.Logger
	// GPUTime, when set, learns tiresias-g's distribution of job
	// GPU-time online, as the simulator does with LearnPrior: each pass's
	// snapshot carries what it has learnt, from the jobs that succeeded
	// and the service of those not yet done. Nil: the scheduler's own.
	GPUTime *sched.GPUTimeLearner
	// Interval is the time between scheduling passes when nothing happens.
	Interval time.Duration
	// LostAfter is how long jobs recorded as running on a machine that is
	// not connected wait for it before they are requeued.
	LostAfter time.Duration
	// MaxRetries is the most times a job that fails on its own is
	// started again, whatever it asked for (Job.Retries); 0 means never.
	// Jobs lost with their machine, or whose GPU failed, are requeued
	// without counting against this.
	MaxRetries int
	// HalfLife is how fast team usage fades for fair share: zero means
	// the default (7 days), negative no decay at all.
	HalfLife time.Duration
	// RetryBackoff is the wait before the first retry; it doubles each time.
	RetryBackoff time.Duration
	// QuickFailure is how soon after its start a run that fails with the
	// same exit code as the run before counts as a fault in the job
	// itself, which retrying will not fix.
	QuickFailure time.Duration
	// Forecast sets up the start forecasts (forecast.go).
	Forecast ForecastConfig
	// MasterPorts are the ports reserved, one per run, for the rendezvous
	// of runs on several machines on their first machine (gang.go);
	// zero: DefaultMasterPorts.
	MasterPorts PortRange
	// Confirm, when set, confirms before each pass that this replica
	// still holds the leader lock; a pass it cannot confirm is skipped
	// (fence.go).
	Confirm func(context.Context) error
	// TakeoverHold is how much longer than LostAfter a machine the engine
	// has not heard since it began leading is waited for before its runs
	// are requeued: a replica that lost the leader lock keeps its machines
	// (and so their runs) that long before it steps down (fence.go).
	TakeoverHold time.Duration
	Now          func() time.Time
}

// Engine runs the scheduling loop. Create it with New, add nodes, then Run.
type Engine struct {
	cfg   Config
	exits chan job.Exit
	wake  chan struct{}
	// recheck is the scheduler's Recheck of the last pass, on the
	// engine's clock: the next pass runs then, or after Interval if that
	// comes first. Zero when the scheduler named no time.
	recheck time.Time
	calls   chan func(context.Context)

	follower atomic.Bool // another replica schedules (replicas.go)
	fence    fence       // the leader lock cannot be confirmed (fence.go)

	mu        sync.Mutex
	nodes     map[string]Node
	connected map[string]time.Time // when each node connected
	draining  map[string]bool      // nodes that take no new jobs
	cordoned  map[string]bool      // nodes that take no new jobs (see cordon.go)

	stats    stats
	health   health   // GPUs' error counters and the GPUs out of service
	monitors monitors // monitor-only agents, by machine (see monitors.go)

	fc *forecasts // start forecasts of waiting jobs (forecast.go)

	alloc allocState // CPU and memory allocations (alloc.go)

	shareMu    sync.Mutex
	shares     []sched.TeamShare            // each team's standing after the last pass
	borrowed   map[int64]time.Time          // running jobs beyond their team's guarantee, and when each may be reclaimed
	userShares map[string][]sched.UserShare // per team: its users' standing after the last pass
	// waitList is why each waiting job waits, and its place in its
	// queue, as of the last pass, in the pass's order; waits is the same
	// by job, made from it when first asked (Waits), nil until then.
	waitList []sched.Wait
	waits    map[int64]sched.Wait
	// reservations are the GPUs the last pass reserved, by job (reserve.go).
	reservations map[int64]sched.Reservation
	// rsvOrder is the same reservations in the pass's order.
	rsvOrder []sched.Reservation
	// keptRsv is the last pass's reservations as the core gave them, in
	// order: the next pass's snapshot hands them back
	// (sched.Snapshot.Reservations), so that a reservation stays with
	// its job and its GPUs until it starts. Only the pass reads and
	// writes it.
	keptRsv []sched.Reservation
	// storedRsv is what the store holds of keptRsv: the pass writes
	// the reservations when they change (reserve.go). Only the pass
	// reads and writes it.
	storedRsv []sched.Reservation

	// Owned by the Run goroutine.
	started    time.Time
	runs       map[int64]*run        // each job's current run on connected nodes (runs.go)
	strays     map[partRef][]int     // parts of runs the cluster does not want, and their GPUs
	placed     map[gpu.Ref]time.Time // when a run last started or ended on each GPU (held.go)
	unrecorded []*unrecorded         // outcomes the store has yet to take
	// heldAdopted are exits of adopted runs held for the next pass's
	// read of the store (stoprequest.go).
	heldAdopted []job.Exit
	heldExits   published[HeldExit] // e.unrecorded, for other goroutines (heldexits.go)
	// stoppingRuns are the runs asked to stop, for other goroutines
	// (stopping.go).
	stoppingRuns published[StoppingRun]
	handover     map[int64]time.Time // jobs kept back while a run stops: when it was asked to
	promised     sched.Promises      // GPUs kept for a job kept back while runs stop, by job (runs.go)
	snapBuf      passBuffers         // the arrays of the last pass's snapshot, reused by the next
	stopLater    []partRef           // runs to ask their machines to stop next pass
	reasons      reasonBook          // the wait reasons as last stored (recordReasons)
	noAccount    refusals            // machines that refused accounts (accounts.go)
	lostSince    map[string]time.Time
	// lostAt is when each machine that came back was lost before: a run
	// it no longer runs ended then, as far as the engine knows.
	lostAt map[string]time.Time
	// endedUnseen are the runs (a part on a machine) the engine ended
	// without their exit, their machine lost, since when: an exit the
	// machine reports when it comes back is recorded late (lateexit.go).
	endedUnseen map[partRef]time.Time
	gone        map[string]GoneNode // under mu (gone.go)
	// waiting is when each waiting job began to wait for its GPUs, for
	// the queue wait of its next start (waits.go); zero when unknown.
	waiting   map[int64]time.Time
	completed bool // a job succeeded since the forecasts' history was read
	teamState teamState
	stored    storedNodeStates // the store's machines' state at the last read; has its own lock (nodestate.go)

	// reasonsAtOnce is how many waits, first in each queue, have a
	// reason whose words changed stored at once (recordReasons): the
	// constant, which tests lower.
	reasonsAtOnce int
}

// New returns an engine for cfg.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil || cfg.Scheduler == nil {
		return nil, errors.New("engine: store and scheduler are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.LostAfter <= 0 {
		cfg.LostAfter = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 30 * time.Second
	}
	if cfg.QuickFailure <= 0 {
		cfg.QuickFailure = time.Minute
	}
	fc, err := newForecasts(&cfg)
	if err != nil {
		return nil, err
	}
	return &Engine{
		cfg:         cfg,
		fc:          fc,
		exits:       make(chan job.Exit, 64),
		wake:        make(chan struct{}, 1),
		calls:       make(chan func(context.Context)),
		nodes:       make(map[string]Node),
		connected:   make(map[string]time.Time),
		draining:    make(map[string]bool),
		runs:        make(map[int64]*run),
		strays:      make(map[partRef][]int),
		placed:      make(map[gpu.Ref]time.Time),
		handover:    make(map[int64]time.Time),
		promised:    make(sched.Promises),
		lostSince:   make(map[string]time.Time),
		lostAt:      make(map[string]time.Time),
		endedUnseen: make(map[partRef]time.Time),
		gone:        make(map[string]GoneNode),
		waiting:     make(map[int64]time.Time),
		stats:       stats{s: emptyStats()},

		reasonsAtOnce: reasonsAtOnce,
	}, nil
}

// Scheduler is the scheduling core the engine asks.
func (e *Engine) Scheduler() *sched.Scheduler { return e.cfg.Scheduler }

// Exits is where agents report the end of job runs.
func (e *Engine) Exits() chan<- job.Exit { return e.exits }

// AddNode connects a machine. Jobs it reports as running are adopted.
func (e *Engine) AddNode(ctx context.Context, n Node) error {
	return e.call(ctx, func(ctx context.Context) {
		e.mu.Lock()
		e.nodes[n.Name()] = n
		e.connected[n.Name()] = e.cfg.Now()
		delete(e.gone, n.Name())
		e.mu.Unlock()
		if since, ok := e.lostSince[n.Name()]; ok {
			e.lostAt[n.Name()] = since
		} else {
			delete(e.lostAt, n.Name())
		}
		delete(e.lostSince, n.Name())
		e.forgetAccounts(n.Name())
		e.adopt(ctx, n)
		e.cfg.Logger.Info("node connected", "node", n.Name(), "gpus", len(n.Devices()))
	})
}

// RemoveNode disconnects a machine, for example when its agent stops
// answering. Its jobs stay recorded as running until it reconnects and
// reports them, or until LostAfter passes and they are requeued.
func (e *Engine) RemoveNode(ctx context.Context, name string) error {
	return e.call(ctx, func(ctx context.Context) {
		e.mu.Lock()
		if n := e.nodes[name]; n != nil {
			e.rememberGone(n, e.cfg.Now())
		}
		delete(e.nodes, name)
		delete(e.connected, name)
		e.mu.Unlock()
		e.lostSince[name] = e.cfg.Now()
		for id, r := range e.runs {
			if !r.parts[name] {
				continue
			}
			if len(r.parts) == 1 && len(r.lost) == 0 {
				// The whole run is forgotten: requeueLost decides its fate
				// from the store, and a reconnect re-adopts it.
				delete(e.runs, id)
				continue
			}
			// A part of a run on several machines: the others stop, and
			// the run ends once this one is known gone (runs.go).
			e.losePart(ctx, id, r, name, "its part on "+name+" was lost with its machine")
		}
		for k := range e.strays {
			if k.node == name {
				// Its machine fences it (docs/agents.md); a reconnect
				// reports it again if it still runs.
				delete(e.strays, k)
			}
		}
		e.cfg.Logger.Warn("node disconnected", "node", name)
		e.stats.add(func(s *Stats) { s.NodesRemoved++ })
	})
}

// ErrUnknownNode is returned for a machine that is not connected.
var ErrUnknownNode = errors.New("no such node connected")

// SetDraining stops (on) or resumes (off) placing new jobs on a machine.
// Jobs running there finish as usual. The setting outlives a reconnect,
// and a restart, in the store (nodestate.go).
func (e *Engine) SetDraining(name string, on bool) error {
	return e.setNodeFlag(name, on, &e.draining, func(ns NodeStateStore, ctx context.Context) error {
		return ns.SetNodeDraining(ctx, name, on, e.cfg.Now())
	})
}

// NodeStatus is a connected machine as admins see it.
type NodeStatus struct {
	Name        string
	Devices     []gpu.Device
	CPUs        int
	MemMiB      int64
	Draining    bool
	Cordoned    bool
	ConnectedAt time.Time
	Jobs        []int64 // jobs running there
}

// NodeStatuses describes the connected machines, by name.
func (e *Engine) NodeStatuses() []NodeStatus {
	nodes := e.Nodes()
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]NodeStatus, 0, len(nodes))
	for _, n := range nodes {
		cpus, mem := n.Resources()
		var jobs []int64
		for _, ref := range n.Running() {
			jobs = append(jobs, ref.Job)
		}
		sort.Slice(jobs, func(a, b int) bool { return jobs[a] < jobs[b] })
		out = append(out, NodeStatus{Name: n.Name(), Devices: n.Devices(), CPUs: cpus, MemMiB: mem,
			Draining: e.draining[n.Name()], Cordoned: e.cordoned[n.Name()], ConnectedAt: e.connected[n.Name()], Jobs: jobs})
	}
	return out
}

// Nodes returns the connected machines, by name.
func (e *Engine) Nodes() []Node {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Node, 0, len(e.nodes))
	for _, n := range e.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name() < out[b].Name() })
	return out
}

// Wake asks for a scheduling pass soon, for example after a submit.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Cancel ends a job: a waiting job at once, a running one by stopping it.
func (e *Engine) Cancel(ctx context.Context, id int64, reason string) error {
	if e.follower.Load() {
		return e.requestCancel(ctx, id, reason)
	}
	var err error
	callErr := e.call(ctx, func(ctx context.Context) {
		if r, ok := e.runs[id]; ok {
			if r.stop == "" {
				r.stop, r.reason = job.Cancelled, reason
			}
			e.stopAll(ctx, id, r)
			return
		}
		err = e.cfg.Store.Cancel(ctx, id, reason, e.cfg.Now())
	})
	if callErr != nil {
		return callErr
	}
	return err
}

// Preempt stops running job id as preemption does (the checkpoint
// signal, the grace, then SIGKILL) and puts it back in the queue, with
// reason on its page: what reclaiming an idle batch job does. Only the
// leader's engine preempts; a job not running is left alone.
func (e *Engine) Preempt(ctx context.Context, id int64, reason string) error {
	if e.follower.Load() {
		return fmt.Errorf("engine: preempt job %d: this replica does not lead", id)
	}
	return e.call(ctx, func(ctx context.Context) {
		if r, ok := e.runs[id]; ok {
			if r.stop == "" {
				r.stop, r.reason = job.Preempted, reason
			}
			e.stopAll(ctx, id, r)
		}
	})
}

// call runs f on the Run goroutine and waits for it.
func (e *Engine) call(ctx context.Context, f func(context.Context)) error {
	done := make(chan struct{})
	select {
	case e.calls <- func(ctx context.Context) { f(ctx); close(done) }:
	case <-ctx.Done():
		return fmt.Errorf("engine: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("engine: %w", ctx.Err())
	}
}

func (e *Engine) node(name string) Node {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nodes[name]
}

// Run schedules until ctx ends. It first loads the machines' state
// (cordons, drains, GPUs out of service) and the kept reservations from
// the store, and returns an error if it cannot, unless it is fenced (a
// server started while its database is out, fence.go): then its first
// pass after Unfence loads them, and it takes machines in meanwhile.
func (e *Engine) Run(ctx context.Context) error {
	e.follower.Store(false)
	e.started = e.cfg.Now()
	// The store's reasons may be another leader's: the first pass stores
	// every one.
	e.reasons.reset()
	if err := e.loadNodeStates(ctx); err != nil {
		if why, _ := e.Fenced(); why == "" {
			return err
		}
		e.cfg.Logger.Warn("machines' state not loaded while fenced: loaded once the leader lock is held", "err", err)
	}
	if err := e.loadReservations(ctx); err != nil {
		if why, _ := e.Fenced(); why == "" {
			return err
		}
		e.cfg.Logger.Warn("reservations not loaded while fenced: loaded once the leader lock is held", "err", err)
	}
	timer := time.NewTimer(e.cfg.Interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case f := <-e.calls:
			f(ctx)
			continue
		case ex := <-e.exits:
			e.handleExit(ctx, ex)
			e.drainEvents(ctx)
		case <-e.wake:
			e.drainEvents(ctx)
		case <-timer.C:
			e.drainEvents(ctx)
		}
		if err := e.pass(ctx); err != nil && ctx.Err() == nil {
			e.cfg.Logger.Error("scheduling pass failed", "err", err)
		}
		timer.Reset(e.untilNextPass(e.cfg.Now()))
	}
}

// drainEvents handles, in the order they arrived, the exits already
// waiting, and takes any wake already asked for, without blocking: one
// pass then follows for all of them, instead of one pass per event. A
// pass is what takes time at a long queue, and the exits waiting behind
// it are recorded late by as many passes as there are before them.
func (e *Engine) drainEvents(ctx context.Context) {
	for {
		select {
		case ex := <-e.exits:
			e.handleExit(ctx, ex)
		case <-e.wake:
		default:
			return
		}
		e.stats.add(func(s *Stats) { s.Coalesced++ })
	}
}

// untilNextPass is how long after now the next pass is due when nothing
// happens: at the last pass's Recheck (a running job crossing a queue
// threshold, a waiting one due for promotion, a locality relaxing, a
// borrowed job reaching its minimum runtime), so that the decision lands
// when the simulator would make it; and never later than Interval.
func (e *Engine) untilNextPass(now time.Time) time.Duration {
	wait := e.cfg.Interval
	if !e.recheck.IsZero() {
		if d := e.recheck.Sub(now); d < wait {
			wait = max(d, 0)
		}
	}
	return wait
}
