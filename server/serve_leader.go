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
// nothing (core/engine/fence.go), and the replica answers as a follower
// (no new agents, no notifications, history or reclaims); its machines
// stay connected and their runs go on, their exits held unacknowledged.
// It then tries the lock again every leaderRetry/4:
//   - taken: it leads again, and the engine catches up (held exits first);
//   - held by another replica: it steps down, exiting with a message, and
//     its supervisor starts it again as a follower; its machines, no
//     longer kept, fence their runs, and reconnect to the new leader;
//   - the database still out after --db-outage-hold: it steps down the
//     same way, so that another replica may lead once the database is back.
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
	// down is closed when the replica steps down: it exits so that it
	// comes back as a follower.
	down     chan struct{}
	downErr  error // set before down closes
	downOnce sync.Once
}

// newReplica makes the replica of this server; start tries the lock.
func newReplica(store *models.Store, hold time.Duration, log *slog.Logger) *replica {
	return &replica{store: store, log: log, hold: hold, down: make(chan struct{})}
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
		l, err := r.store.TryLead(ctx, leaderRetry)
		switch {
		case err == nil && l != nil:
			return l
		case err == nil:
			r.stepDown(errors.New("another replica took the leader lock while this one could not confirm it: stepping down (exiting) without scheduling again; restart it to serve as a follower"))
			return nil
		case time.Since(since) >= r.hold:
			r.stepDown(fmt.Errorf("the leader lock could not be taken back within --db-outage-hold %v (%w): stepping down (exiting), so that its machines fence their runs and another replica may lead once the database is back",
				r.hold, err))
			return nil
		}
	}
}

// stepDown ends this replica's leadership for good: the engine stays
// fenced, and runServe returns err.
func (r *replica) stepDown(err error) {
	r.downOnce.Do(func() { r.downErr = err; close(r.down) })
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

// leaderWork is what the leader started: the engine loop and the built-in
// agents, stopped at shutdown.
type leaderWork struct {
	mu      sync.Mutex
	engDone chan error // nil until the engine runs
	agents  []*agent.Local
}

func (w *leaderWork) engineRuns(done chan error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.engDone = done
}

func (w *leaderWork) addAgent(a *agent.Local) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.agents = append(w.agents, a)
}

// stop waits for the engine, which the caller has told to stop, then shuts
// the built-in agents down.
func (w *leaderWork) stop(ctx context.Context, log *slog.Logger) {
	w.mu.Lock()
	done, agents := w.engDone, w.agents
	w.mu.Unlock()
	if done != nil {
		<-done
	}
	for _, a := range agents {
		if err := a.Shutdown(ctx); err != nil {
			log.Warn("agent shutdown", "err", err)
		}
	}
}
