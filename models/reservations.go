package models

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// The reservations the scheduling leader's last pass kept (docs/scheduling.md,
// "Reservations"), kept so that a restarted server or a new leader replica
// hands the same ones back to its first pass (engine.ReservationStore,
// through package enginestore): the same job keeps the same GPUs, its
// expected start only moves earlier, and its deadline, which the core
// derives from the job's stored times, stays where it was.

// Reservation is one job's reservation. Seq is its place among the pass's
// reservations, which the core reads in order.
type Reservation struct {
	JobID int64 `gorm:"primaryKey;autoIncrement:false"`
	Seq   int   `gorm:"not null"`
	// GPUs names the reserved GPUs, a JSON array of "node:index"; empty
	// in count placement, which names none.
	GPUs      string  `gorm:"column:gpus;type:text;not null;default:''"`
	Count     int     `gorm:"not null"`
	FromS     float64 `gorm:"column:from_s;not null"`
	DueS      float64 `gorm:"column:due_s;not null"`
	UpdatedAt time.Time
}

func (Reservation) TableName() string { return "reservations" }

// GPURefs are the GPUs r names (GPUs read back); nil in count placement.
func (r Reservation) GPURefs() ([]gpu.Ref, error) {
	if r.GPUs == "" {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal([]byte(r.GPUs), &names); err != nil {
		return nil, fmt.Errorf("reservation of job %d: GPUs %q: %w", r.JobID, r.GPUs, err)
	}
	if len(names) == 0 {
		return nil, nil
	}
	return gpu.ParsePlacement(names), nil
}

// Reservations returns the stored reservations in order.
func (s *Store) Reservations(ctx context.Context) ([]Reservation, error) {
	var rs []Reservation
	if err := s.db.WithContext(ctx).Order("seq, job_id").Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("read reservations: %w", err)
	}
	return rs, nil
}

// SetReservations replaces the stored reservations with rs, in one
// transaction: a reader sees the last pass's or the one before's, never a
// mix.
func (s *Store) SetReservations(ctx context.Context, rs []Reservation) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("1 = 1").Delete(&Reservation{}).Error; err != nil {
			return err
		}
		if len(rs) == 0 {
			return nil
		}
		return tx.Create(&rs).Error
	})
	if err != nil {
		return fmt.Errorf("record %d reservations: %w", len(rs), err)
	}
	return nil
}
