package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm/clause"

	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/trace"
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
	// CPUCurve and MemCurve are the curves as trace.FormatCurve writes
	// them ("0:0;3:0.42;12:1"); empty: insensitive.
	CPUCurve   string `gorm:"size:2048;not null"`
	MemCurve   string `gorm:"size:2048;not null"`
	JobID      int64  // the job that was profiled
	MeasuredAt time.Time
}

func formatCurve(c synergy.Curve) string {
	pts := make([]trace.CurvePoint, len(c))
	for i, p := range c {
		pts[i] = trace.CurvePoint{X: p.X, Speed: p.Speed}
	}
	return trace.FormatCurve(pts)
}

func parseCurve(s string) (synergy.Curve, error) {
	pts, err := trace.ParseCurve(s)
	if err != nil {
		return nil, err
	}
	c := make(synergy.Curve, len(pts))
	for i, p := range pts {
		c[i] = synergy.Point{X: p.X, Speed: p.Speed}
	}
	return c, nil
}

// SaveCPUProfile keeps a measured profile of model at batch size batch,
// replacing an earlier one (engine.ProfileStore).
func (s *Store) SaveCPUProfile(ctx context.Context, lp synergy.LearnedProfile) error {
	r := CPUProfile{Model: strings.ToLower(lp.Model), Batch: lp.Batch, Family: lp.Profile.Family,
		CPUCurve: formatCurve(lp.Profile.CPU), MemCurve: formatCurve(lp.Profile.Mem), JobID: lp.JobID, MeasuredAt: lp.At}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&r).Error
	if err != nil {
		return fmt.Errorf("save CPU profile of %s at batch %d: %w", lp.Model, lp.Batch, err)
	}
	return nil
}

// CPUProfiles returns every measured profile (engine.ProfileStore).
func (s *Store) CPUProfiles(ctx context.Context) ([]synergy.LearnedProfile, error) {
	var rs []CPUProfile
	if err := s.db.WithContext(ctx).Order("model, batch").Find(&rs).Error; err != nil {
		return nil, fmt.Errorf("read CPU profiles: %w", err)
	}
	out := make([]synergy.LearnedProfile, 0, len(rs))
	for _, r := range rs {
		cpu, err := parseCurve(r.CPUCurve)
		if err != nil {
			return nil, fmt.Errorf("CPU profile of %s at batch %d: cpu curve: %w", r.Model, r.Batch, err)
		}
		mem, err := parseCurve(r.MemCurve)
		if err != nil {
			return nil, fmt.Errorf("CPU profile of %s at batch %d: memory curve: %w", r.Model, r.Batch, err)
		}
		out = append(out, synergy.LearnedProfile{Model: r.Model, Batch: r.Batch, JobID: r.JobID, At: r.MeasuredAt,
			Profile: synergy.Profile{Family: r.Family, CPU: cpu, Mem: mem}})
	}
	return out, nil
}
