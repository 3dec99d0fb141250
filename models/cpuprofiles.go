package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm/clause"
)

// CPUProfile is a job's CPU and memory sensitivity as an agent's
// profiling phase measured it, kept by model and batch size so that the
// next job of the same model is not profiled again (docs/synergy.md).
// The table, cpu_profiles, comes with its migration step.
type CPUProfile struct {
	Model string `gorm:"primaryKey;size:64"`
	Batch int    `gorm:"primaryKey;autoIncrement:false"`
	// Family is where the curves came from ("measured").
	Family string `gorm:"size:32;not null"`
	// CPUCurve and MemCurve are the curves as core/trace's FormatCurve writes
	// them ("0:0;3:0.42;12:1"); empty: insensitive.
	CPUCurve   string `gorm:"size:2048;not null"`
	MemCurve   string `gorm:"size:2048;not null"`
	JobID      int64  // the job that was profiled
	MeasuredAt time.Time
}

// SaveCPUProfile keeps a measured profile, replacing an earlier one of
// the same model (lower-cased) and batch size; enginestore turns the
// engine's profiles into these rows and back.
func (s *Store) SaveCPUProfile(ctx context.Context, r CPUProfile) error {
	r.Model = strings.ToLower(r.Model)
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&r).Error
	if err != nil {
		return fmt.Errorf("save CPU profile of %s at batch %d: %w", r.Model, r.Batch, err)
	}
	return nil
}

// CPUProfiles returns every measured profile, by model and batch size.
func (s *Store) CPUProfiles(ctx context.Context) ([]CPUProfile, error) {
	var rs []CPUProfile
	if err := s.db.WithContext(ctx).Order("model, batch").Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("read CPU profiles: %w", err)
	}
	return rs, nil
}
