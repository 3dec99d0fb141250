package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/agent/hub"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/models"
)

// Several `serve` replicas may share one PostgreSQL database. Each serves
// pages and the API; the one holding the leader lock (models.Lease) also
// schedules: it runs the engine loop, takes agents, runs the executor and
// the built-in agents. The others retry the lock every leaderRetry and
// take over when the leader's database session ends. With SQLite the one
// replica is always the leader.
//
// A leader rides out a database outage (docs/operations.md, "Several
// server replicas"). The moment it cannot confirm its lock (the lock's
// session failed its check) it is fenced: the engine decides and records
// nothing (core/engine/fence.go), and the replica sends no
// notifications, history or reclaims; its machines stay connected (or
// reconnect: it still takes its agents, web/leader.go, on the
// credentials it checked before, core/agent/hub/identity.go) and their
// runs go on, their exits held unacknowledged.
// It then tries the lock again every leaderRetry/4:
//   - taken: it leads again, and the engine catches up (held exits first);
//   - held by another replica: it steps down to a follower, without
//     exiting (stepDownTo): it closes its agents' connections and takes
//     no more (they reconnect to the new leader, with their runs if
//     within the heartbeat timeout, else they fence them), stops its
//     engine loop, executor and built-in agents (whose runs end), and
//     its engine forgets what it led; then it follows, as at start;
//   - the database still out after --db-outage-hold: it steps down the
//     same way, so that another replica may lead once the database is
//     back (this one too: it tries the lock as any follower does).
// A follower tries the lock only once the database has answered it for
// followerHeadStart without a break: after an outage the old leader,
// which tries four times as often, takes it back first. And a new leader
// waits --db-outage-hold longer than usual before it requeues the runs of
// a machine it has not heard (engine.Config.TakeoverHold): the replica
// that led before may have kept them running that long.

// leaderRetry is how often a follower tries the leader lock, and how often
// the leader checks that it still holds it.
const leaderRetry = time.Second

// followerHeadStart is how long a follower waits, after the database
// answers it again, before it tries the leader lock: the leader's lead to
// take its lock back. It is well above the leader's own retry
// (leaderRetry/4) and its check (leaderRetry, each within 2 leaderRetry).
const followerHeadStart = 5 * leaderRetry

// takeoverHold is engine.Config.TakeoverHold for --db-outage-hold: the
// hold, and the time a leader may take to find its lock lost (a check
// every leaderRetry, each given 2 leaderRetry).
func takeoverHold(hold time.Duration) time.Duration { return hold + 3*leaderRetry }

// fencer is the part of the engine the replica fences.
type fencer interface {
	Fence(why string)
	Unfence()
}

// replica is this server's role among the replicas of its database.
type replica struct {
	store *models.Store
	log   *slog.Logger
	eng   fencer
	// hold is how long a fenced leader waits for the database and its
	// lock before it steps down (--db-outage-hold).
	hold time.Duration

	lease atomic.Pointer[models.Lease]
	// fencedSince is when the lock, once held, could not be confirmed;
	// zero while it is held or was never held.
	fencedSince atomic.Pointer[time.Time]
	// down carries why the replica lost its lock for good: runServe
	// then steps it down to a follower (stepDownTo).
	down chan error
}

// newReplica makes the replica of this server; start tries the lock.
func newReplica(store *models.Store, hold time.Duration, log *slog.Logger) *replica {
	return &replica{store: store, log: log, hold: hold, down: make(chan error, 1)}
}

// start tries the leader lock once; a replica that does not get it
// starts as a follower.
func (r *replica) start(ctx context.Context, eng *engine.Engine) error {
	r.eng = eng
	ok, err := r.tryLead(ctx)
	if err != nil {
		return err
	}
	if !ok {
		eng.SetFollower()
		r.log.Info("another replica schedules: serving pages and the API as a follower",
			"retry", leaderRetry.String())
	}
	return nil
}

// startFenced starts this replica as a leader fenced from the start: the
// server started while its database did not answer (err), and no replica
// can take the lock meanwhile. Its engine is fenced, as a leader's that
// lost its lock is (keep): it takes machines in on the credentials its
// hub checked before (kept on disk) and their runs go on, but it decides
// and records nothing. Once the database answers, the store is made
// ready and the lock tried every leaderRetry/4: taken, it leads (its
// first pass adopts the runs its machines reported); held by another
// replica, or the database still out after the hold, it steps down
// (retake).
func (r *replica) startFenced(ctx context.Context, eng *engine.Engine, err error) {
	r.eng = eng
	since := time.Now()
	eng.Fence("the database did not answer when this server started: " + err.Error())
	r.fencedSince.Store(&since)
	go func() {
		l := r.retake(ctx, since)
		if l == nil {
			return
		}
		r.fencedSince.Store(nil)
		r.lease.Store(l)
		r.eng.Unfence()
		r.log.Info("the database answers and the leader lock is this replica's: scheduling", "after", time.Since(since).Round(time.Millisecond))
		r.keep(ctx, l)
	}()
}

// leader reports whether this replica holds the leader lock, confirmed.
func (r *replica) leader() bool { return r.lease.Load() != nil }

// confirm checks that this replica holds the lock now
// (engine.Config.Confirm).
func (r *replica) confirm(ctx context.Context) error {
	l := r.lease.Load()
	if l == nil {
		return errors.New("this replica does not hold the leader lock")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*leaderRetry)
	defer cancel()
	return l.Confirm(ctx)
}

// tryLead takes the leader lock if it is free.
func (r *replica) tryLead(ctx context.Context) (bool, error) {
	l, err := r.store.TryLead(ctx, leaderRetry)
	if err != nil || l == nil {
		return false, err
	}
	r.lease.Store(l)
	r.log.Info("this replica is the leader: it schedules and takes agents")
	go r.keep(ctx, l)
	return true, nil
}

// keep watches lease l: when it is lost, the engine is fenced at once,
// and the lock tried again until it is taken (the engine unfenced, and l
// the new lease) or the replica steps down.
func (r *replica) keep(ctx context.Context, l *models.Lease) {
	for {
		select {
		case <-l.Lost():
		case <-ctx.Done():
			return
		}
		// Fenced before anything else: another replica may take over
		// once the database answers it.
		r.eng.Fence(l.Err().Error())
		r.lease.CompareAndSwap(l, nil)
		l.Release()
		since := time.Now()
		r.fencedSince.Store(&since)
		r.log.Warn("lost the leader lock: scheduling stopped; machines and their runs kept while it is taken back",
			"err", l.Err(), "hold", r.hold.String())
		if l = r.retake(ctx, since); l == nil {
			return
		}
		r.fencedSince.Store(nil)
		r.lease.Store(l)
		r.eng.Unfence()
		r.log.Info("took the leader lock back: scheduling again", "after", time.Since(since).Round(time.Millisecond))
	}
}

// retake tries the lock every leaderRetry/4 from since, when it was lost.
// It returns the new lease, or nil when ctx ends or the replica stepped
// down: another replica holds the lock, or hold has passed.
func (r *replica) retake(ctx context.Context, since time.Time) *models.Lease {
	t := time.NewTicker(leaderRetry / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		l, err := r.tryLock(ctx)
		switch {
		case err == nil && l != nil:
			return l
		case err == nil:
			r.stepDown(errors.New("another replica took the leader lock while this one could not confirm it: stepping down to a follower without scheduling again"))
			return nil
		case time.Since(since) >= r.hold:
			r.stepDown(fmt.Errorf("the leader lock could not be taken back within --db-outage-hold %v (%w): stepping down to a follower, so that its machines fence their runs and any replica may lead once the database is back",
				r.hold, err))
			return nil
		}
	}
}

// tryLock makes the store ready (a server started during an outage has
// not, models.Store.Ready) and tries the leader lock. A store that
// answers but cannot be made ready (a session key of another) steps the
// replica down: follow then returns the same error, and the server exits.
func (r *replica) tryLock(ctx context.Context) (*models.Lease, error) {
	pctx, cancel := context.WithTimeout(ctx, 2*leaderRetry)
	err := r.store.Ping(pctx)
	cancel()
	if err != nil {
		return nil, err
	}
	if err := r.store.Ready(ctx); err != nil {
		if !models.Unavailable(err) {
			r.stepDown(err)
		}
		return nil, err
	}
	return r.store.TryLead(ctx, leaderRetry)
}

// stepDown ends this replica's leadership for good: the engine stays
// fenced until runServe, told err, steps it down (stepDownTo).
func (r *replica) stepDown(err error) {
	select {
	case r.down <- err:
	default: // one leadership, one step down
	}
}

// stepDownTo makes this replica a follower once it lost its lock for good
// (err, from down): its agents are dropped (they reconnect to the leader,
// their runs with them while within their lease), the leader's work stops
// (the engine loop, the executor, the built-in agents) while the engine
// is still fenced, and the engine forgets what it led. The replica then
// follows as at start: the channel returned is follow's.
func (r *replica) stepDownTo(ctx context.Context, err error, agents *hub.Hub, work *leaderWork, eng *engine.Engine, lead func() error) <-chan error {
	r.log.Warn("stepping down: serving pages and the API as a follower", "err", err)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := agents.Drop(dctx); err != nil {
		r.log.Warn("drop the agents' connections", "err", err)
	}
	cancel()
	work.stop(ctx, r.log)
	eng.StepDown()
	r.fencedSince.Store(nil)
	return r.follow(ctx, lead)
}

// fenced says since when this replica, once the leader, has not been able
// to confirm its lock; zero when it leads or follows.
func (r *replica) fenced() time.Time {
	if t := r.fencedSince.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// follow waits, as a follower, for the leader lock and then calls lead.
// It tries the lock only once the database has answered for
// followerHeadStart without a break (see above). The channel it returns
// carries lead's error, if any. A leader's follow does nothing.
func (r *replica) follow(ctx context.Context, lead func() error) <-chan error {
	out := make(chan error, 1)
	if r.leader() {
		return out
	}
	go func() {
		t := time.NewTicker(leaderRetry)
		defer t.Stop()
		answering := time.Now() // the database answered at the start
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pctx, cancel := context.WithTimeout(ctx, 2*leaderRetry)
			err := r.store.Ping(pctx)
			cancel()
			if err != nil {
				answering = time.Time{}
				continue
			}
			if answering.IsZero() {
				answering = time.Now()
				r.log.Info("the database answers again: trying the leader lock after the leader's head start", "head_start", followerHeadStart.String())
			}
			if time.Since(answering) < followerHeadStart {
				continue
			}
			if err := r.store.Ready(ctx); err != nil {
				if models.Unavailable(err) {
					continue
				}
				out <- err
				return
			}
			ok, err := r.tryLead(ctx)
			if err != nil {
				r.log.Warn("try the leader lock", "err", err)
				continue
			}
			if ok {
				if err := lead(); err != nil {
					out <- err
				}
				return
			}
		}
	}()
	return out
}

// release gives the lock up, if held.
func (r *replica) release() {
	if l := r.lease.Load(); l != nil {
		l.Release()
	}
}

// leaderWork is what the leader started: the engine loop, the executor
// and the built-in agents, stopped when it steps down and at shutdown.
type leaderWork struct {
	mu      sync.Mutex
	end     context.CancelFunc // ends the leadership's context; nil before
	engDone chan error         // nil until the engine runs
	agents  []*agent.Local
	// watchdog stops the built-in agents' jobs if the server dies; nil
	// when none runs.
	watchdog *agent.WatchdogLink
}

// begin returns the context of a leadership, which stop ends.
func (w *leaderWork) begin(parent context.Context) context.Context {
	ctx, cancel := context.WithCancel(parent)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.end = cancel
	return ctx
}

func (w *leaderWork) engineRuns(done chan error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.engDone = done
}

func (w *leaderWork) setWatchdog(l *agent.WatchdogLink) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchdog = l
}

func (w *leaderWork) addAgent(a *agent.Local) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.agents = append(w.agents, a)
}

// stop ends the leadership's context, waits for the engine loop, then
// shuts the built-in agents down; a later begin starts afresh.
func (w *leaderWork) stop(ctx context.Context, log *slog.Logger) {
	w.mu.Lock()
	end, done, agents, watchdog := w.end, w.engDone, w.agents, w.watchdog
	w.end, w.engDone, w.agents, w.watchdog = nil, nil, nil, nil
	w.mu.Unlock()
	if end != nil {
		end()
	}
	if done != nil {
		<-done
	}
	for _, a := range agents {
		if err := a.Shutdown(ctx); err != nil {
			log.Warn("agent shutdown", "err", err)
		}
	}
	if err := watchdog.Close(); err != nil {
		log.Warn("job watchdog", "err", err)
	}
}
