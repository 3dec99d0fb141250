package engine

import (
	"math"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
)

// Reservations (docs/scheduling.md, "Reservations"): the core reserves
// GPUs for a job that has waited past its bound and cannot start, and
// says so in its wait reason in seconds ("expected free in 420 s"). The
// engine words it for the job's owner on the engine's clock ("GPUs
// node-3:0-7 reserved for you from 14:05") and publishes each reservation
// of the last pass for the pages and the API (Reservation).

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
				w.Reason = strings.Replace(w.Reason, r.Clause(nowS), reservationText(r, nowS), 1)
			}
		}
	}
	e.keptRsv = rs
	e.shareMu.Lock()
	e.reservations = byJob
	e.shareMu.Unlock()
}

// reservationText says to the reserved job's owner which GPUs are held
// for the job and from when, on the engine's clock in the server's time
// zone: "GPUs node-3:0-7 reserved for you from 14:05" (with the date when
// that is a day or more away).
func reservationText(r sched.Reservation, nowS float64) string {
	from := "now"
	if r.FromS-nowS >= 0.5 {
		at := reservationFrom(r)
		layout := "15:04"
		if r.FromS-nowS >= 20*3600 {
			layout = "Jan 2 15:04"
		}
		from = at.Format(layout)
	}
	return r.GPUText() + " reserved for you from " + from
}

// reservationFrom is when r's GPUs are expected to be free, on the
// engine's clock, in the server's time zone.
func reservationFrom(r sched.Reservation) time.Time {
	ns := r.FromS * 1e9
	if !(ns < math.MaxInt64) {
		return time.Time{}
	}
	return time.Unix(0, int64(math.Round(ns))).Local()
}

// ReservedGPUs maps each GPU ("node:index") reserved in the last pass to
// the reservation that holds it, and when its GPUs are expected to be
// free: the cluster page marks them. A reservation by count (no GPUs
// named) marks none.
func (e *Engine) ReservedGPUs() map[string]ReservedGPU {
	e.shareMu.Lock()
	defer e.shareMu.Unlock()
	out := make(map[string]ReservedGPU)
	for _, r := range e.reservations {
		for _, g := range r.GPUs {
			out[g.String()] = ReservedGPU{JobID: r.JobID, From: reservationFrom(r)}
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
	return r, reservationFrom(r), true
}
