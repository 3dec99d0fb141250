package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
)

// Reservations (docs/scheduling.md, "Reservations"): the core reserves
// GPUs for a job that has waited past its bound and cannot start, and
// says so in its wait reason in seconds ("expected free in 420 s"). The
// engine words it for the job's owner ("GPUs node-3:0-7 reserved for
// you"), leaving when the job starts to its forecast, and publishes each
// reservation of the last pass for the pages and the API (Reservation).

// ReservationStore keeps the reservations of the leader's last pass, so
// that a restarted server or a new leader hands the core the same ones
// (sched.Snapshot.Reservations): the same job keeps the same GPUs, and its
// expected start only moves earlier. Its due time, and so its deadline,
// the core derives from the job's stored times, the same on any server.
type ReservationStore interface {
	// Reservations returns the stored reservations, in the pass's order.
	Reservations(ctx context.Context) ([]sched.Reservation, error)
	// SetReservations replaces them with a pass's.
	SetReservations(ctx context.Context, rs []sched.Reservation, now time.Time) error
}

// loadReservations reads the stored reservations for the next pass to keep,
// and publishes them until that pass replaces them.
func (e *Engine) loadReservations(ctx context.Context) error {
	rs, err := e.cfg.Store.Reservations(ctx)
	if err != nil {
		return fmt.Errorf("load reservations: %w", err)
	}
	e.storedRsv = rs
	e.noteReservations(rs, nil, 0)
	return nil
}

// storeReservations writes the last pass's reservations when they differ
// from the stored ones: another job or GPUs, or an expected start a second
// or more earlier. A write that fails is tried again at the next pass; the
// pass goes on, as a reservation lost to a crash meanwhile is made afresh.
func (e *Engine) storeReservations(ctx context.Context, now time.Time) {
	if sameReservations(e.keptRsv, e.storedRsv) || !e.mayRecord() {
		return
	}
	if err := e.cfg.Store.SetReservations(ctx, e.keptRsv, now); err != nil {
		e.cfg.Logger.Warn("record reservations", "err", err)
		return
	}
	e.storedRsv = e.keptRsv
}

// sameReservations tells whether a and b keep the same jobs on the same
// GPUs, from the same due time, and expect them free within a second of
// each other.
func sameReservations(a, b []sched.Reservation) bool {
	return slices.EqualFunc(a, b, func(x, y sched.Reservation) bool {
		return x.JobID == y.JobID && x.Count == y.Count && x.DueS == y.DueS &&
			math.Abs(x.FromS-y.FromS) < 1 && slices.Equal(x.GPUs, y.GPUs)
	})
}

// noteReservations rewords the reasons of the reserved jobs among waits
// and publishes the pass's reservations; nowS is the snapshot's clock.
func (e *Engine) noteReservations(rs []sched.Reservation, waits []sched.Wait, nowS float64) {
	var byJob map[int64]sched.Reservation
	if len(rs) > 0 {
		byJob = make(map[int64]sched.Reservation, len(rs))
		for _, r := range rs {
			byJob[r.JobID] = r
		}
		for i := range waits {
			w := &waits[i]
			if r, ok := byJob[w.JobID]; ok {
				w.Reason = strings.Replace(w.Reason, r.Clause(nowS), reservationText(r), 1)
			}
		}
	}
	e.keptRsv = rs
	e.shareMu.Lock()
	e.reservations, e.rsvOrder = byJob, rs
	e.shareMu.Unlock()
}

// reservationText says which GPUs are held for the job: "GPUs
// node-3:0-7 reserved for this job", words that read the same to its
// owner, to an admin and on the Queues page (they said "for you", which
// an admin read on another user's job). It gives no time: when
// the job starts is its forecast's to say (the job's page shows it
// beside the reason), and the reservation's own estimate (FromS, the
// time by which jobs that start on the GPUs meanwhile must end) is
// another figure, which a start time here would contradict.
func reservationText(r sched.Reservation) string {
	return r.GPUText() + " reserved for this job"
}

// ReservationFrom is when r's GPUs are expected to be free, on the
// engine's clock, in the server's time zone.
func ReservationFrom(r sched.Reservation) time.Time { return ClockTime(r.FromS) }

// ReservationDue is when r's job became due for its reservation (it had
// waited its bound), on the engine's clock, in the server's time zone.
func ReservationDue(r sched.Reservation) time.Time { return ClockTime(r.DueS) }

// ClockTime is a time of the snapshot's clock (seconds since the epoch),
// in the server's time zone: a stored reservation's FromS and DueS read
// on a follower replica.
func ClockTime(s float64) time.Time {
	ns := s * 1e9
	if !(ns < math.MaxInt64) {
		return time.Time{}
	}
	return time.Unix(0, int64(math.Round(ns))).Local()
}

// Reservations are the reservations of the last pass, in its order (the
// first holds its GPUs before the others).
func (e *Engine) Reservations() []sched.Reservation {
	e.shareMu.Lock()
	defer e.shareMu.Unlock()
	return slices.Clone(e.rsvOrder)
}

// StoredReservations are the reservations the leader stored
// (ReservationStore), in its last pass's order: what a follower replica,
// which runs no passes, shows.
func (e *Engine) StoredReservations(ctx context.Context) ([]sched.Reservation, error) {
	rs, err := e.cfg.Store.Reservations(ctx)
	if err != nil {
		return nil, fmt.Errorf("read stored reservations: %w", err)
	}
	return rs, nil
}

// ReservedGPUsOf maps each GPU ("node:index") that rs reserve to the
// reservation that holds it, and when its GPUs are expected to be free:
// the cluster page marks them, on the leader from its engine's last pass
// (Engine.Reservations), on a follower replica from the reservations the
// leader stored. A reservation by count (no GPUs named) marks none.
func ReservedGPUsOf(rs []sched.Reservation) map[string]ReservedGPU {
	out := make(map[string]ReservedGPU)
	for _, r := range rs {
		for _, g := range r.GPUs {
			out[g.String()] = ReservedGPU{JobID: r.JobID, From: ReservationFrom(r)}
		}
	}
	return out
}

// ReservedGPU is a GPU held for a job's reservation.
type ReservedGPU struct {
	JobID int64
	From  time.Time // when its GPUs are expected to be free
}

// Reservation is the reservation job id held in the last pass, and when
// its GPUs are expected to be free on the engine's clock; ok is false
// when it held none.
func (e *Engine) Reservation(id int64) (r sched.Reservation, from time.Time, ok bool) {
	e.shareMu.Lock()
	defer e.shareMu.Unlock()
	r, ok = e.reservations[id]
	if !ok {
		return r, time.Time{}, false
	}
	return r, ReservationFrom(r), true
}
