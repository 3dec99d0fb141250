package enginestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
)

// Reservations returns the reservations the scheduling leader's last pass
// kept, in the pass's order (engine.ReservationStore): what the leader's
// engine loads when it starts, and what a follower replica shows
// (Engine.StoredReservations).
func (s Store) Reservations(ctx context.Context) ([]sched.Reservation, error) {
	rows, err := s.Store.Reservations(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]sched.Reservation, 0, len(rows))
	for _, r := range rows {
		gpus, err := r.GPURefs()
		if err != nil {
			return nil, err
		}
		out = append(out, sched.Reservation{JobID: r.JobID, GPUs: gpus, Count: r.Count, FromS: r.FromS, DueS: r.DueS})
	}
	return out, nil
}

// SetReservations replaces the stored reservations with rs, a pass's.
func (s Store) SetReservations(ctx context.Context, rs []sched.Reservation, now time.Time) error {
	rows := make([]models.Reservation, len(rs))
	for i, r := range rs {
		rows[i] = models.Reservation{JobID: r.JobID, Seq: i, Count: r.Count, FromS: r.FromS, DueS: r.DueS, UpdatedAt: now}
		if len(r.GPUs) > 0 {
			b, err := json.Marshal(formatPlacement(r.GPUs))
			if err != nil {
				return fmt.Errorf("reservation of job %d: %w", r.JobID, err)
			}
			rows[i].GPUs = string(b)
		}
	}
	return s.Store.SetReservations(ctx, rows)
}
