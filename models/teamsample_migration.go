package models

import (
	"fmt"
	"time"

	"gorm.io/gorm"
)

// v11TeamSample is team_samples as step 11 leaves it: GPUs in use and
// borrowed are fractions, a shared GPU counted by the share each job
// holds of it (core/usage).
type v11TeamSample struct {
	ID            int64     `gorm:"primaryKey"`
	Team          string    `gorm:"size:64;index:idx_team_sample,priority:1;not null"`
	At            time.Time `gorm:"index:idx_team_sample,priority:2;not null"`
	InUseGPUs     float64
	BorrowedGPUs  float64
	GuaranteeGPUs int
}

func (v11TeamSample) TableName() string { return "team_samples" }

// teamSampleFractions makes the GPUs in use and borrowed of team samples
// fractional. Old rows keep their whole numbers.
func teamSampleFractions(tx *gorm.DB) error {
	for _, f := range []string{"InUseGPUs", "BorrowedGPUs"} {
		if err := tx.Migrator().AlterColumn(&v11TeamSample{}, f); err != nil {
			return fmt.Errorf("alter column %s: %w", f, err)
		}
	}
	return nil
}
