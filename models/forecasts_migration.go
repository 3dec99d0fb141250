package models

import (
	"time"

	"gorm.io/gorm"
)

// v13Forecast is the table step 13 creates: jobs' start forecasts
// (forecasts.go), frozen as the step made it.
type v13Forecast struct {
	ID       int64     `gorm:"primaryKey"`
	JobID    int64     `gorm:"uniqueIndex:idx_forecasts_job_kind,priority:1;not null"`
	Kind     string    `gorm:"uniqueIndex:idx_forecasts_job_kind,priority:2;size:16;not null"`
	MadeAt   time.Time `gorm:"index;not null"`
	State    string    `gorm:"size:16;not null"`
	Earliest *time.Time
	Likely   *time.Time
	Latest   *time.Time
	Reason   string `gorm:"size:512"`
}

func (v13Forecast) TableName() string { return "forecasts" }

func forecastsTable(tx *gorm.DB) error {
	return createTables(tx, &v13Forecast{})
}
