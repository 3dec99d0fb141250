package models

import (
	"time"

	"gorm.io/gorm"
)

// The tables step 21 creates (accounting.go), frozen as the step made
// them.

type v21AccountingDay struct {
	Day                 string  `gorm:"column:day;primaryKey;size:10"`
	Team                string  `gorm:"column:team;primaryKey;size:64"`
	UserName            string  `gorm:"column:user_name;primaryKey;size:64"`
	AllocatedGPUSeconds float64 `gorm:"column:allocated_gpu_seconds;not null"`
	UsedGPUSeconds      float64 `gorm:"column:used_gpu_seconds;not null"`
	SampledGPUSeconds   float64 `gorm:"column:sampled_gpu_seconds;not null"`
	IdleGPUSeconds      float64 `gorm:"column:idle_gpu_seconds;not null"`
}

func (v21AccountingDay) TableName() string { return "accounting_days" }

type v21AccountingClosedDay struct {
	Day          string    `gorm:"column:day;primaryKey;size:10"`
	IdleBelowPct float64   `gorm:"column:idle_below_pct;not null"`
	ClosedAt     time.Time `gorm:"column:closed_at;not null"`
}

func (v21AccountingClosedDay) TableName() string { return "accounting_closed_days" }

func accountingTables(tx *gorm.DB) error {
	return createTables(tx, &v21AccountingDay{}, &v21AccountingClosedDay{})
}
