package main

import (
	"context"
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

// leaderRetry is how often a follower tries the leader lock, and how often
// the leader checks that it still holds it.
const leaderRetry = time.Second

// replica is this server's role among the replicas of its database.
type replica struct {
	store *models.Store
	log   *slog.Logger

	lease atomic.Pointer[models.Lease]
	// lost is closed when the lease, once held, is lost.
	lost     chan struct{}
	lostErr  error // set before lost closes
	lostOnce sync.Once
}

// newReplica tries the leader lock once; a replica that does not get it
// starts as a follower.
func newReplica(ctx context.Context, store *models.Store, eng *engine.Engine, log *slog.Logger) (*replica, error) {
	r := &replica{store: store, log: log, lost: make(chan struct{})}
	ok, err := r.tryLead(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		eng.SetFollower()
		log.Info("another replica schedules: serving pages and the API as a follower",
			"retry", leaderRetry.String())
	}
	return r, nil
}

// leader reports whether this replica holds the leader lock.
func (r *replica) leader() bool { return r.lease.Load() != nil }

// tryLead takes the leader lock if it is free.
func (r *replica) tryLead(ctx context.Context) (bool, error) {
	l, err := r.store.TryLead(ctx, leaderRetry)
	if err != nil || l == nil {
		return false, err
	}
	r.lease.Store(l)
	r.log.Info("this replica is the leader: it schedules and takes agents")
	go func() {
		select {
		case <-l.Lost():
			// A follower at once: no more agents, /healthz says so.
			r.lease.CompareAndSwap(l, nil)
			l.Release()
			r.lostOnce.Do(func() { r.lostErr = l.Err(); close(r.lost) })
		case <-ctx.Done():
		}
	}()
	return true, nil
}

// follow waits, as a follower, for the leader lock and then calls lead.
// The channel it returns carries lead's error, if any. A leader's follow
// does nothing.
func (r *replica) follow(ctx context.Context, lead func() error) <-chan error {
	out := make(chan error, 1)
	if r.leader() {
		return out
	}
	go func() {
		t := time.NewTicker(leaderRetry)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
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

// lostError says why the lease was lost.
func (r *replica) lostError() error {
	return fmt.Errorf("lost the leader lock (%w): stopped scheduling and exiting, as another replica may lead now; restart this one to serve as a follower",
		r.lostErr)
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
