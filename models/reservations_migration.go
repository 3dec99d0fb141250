package models

import (
	"time"

	"gorm.io/gorm"
)

// v45Reservation is the reservations table (reservations.go) as step 45
// creates it.
type v45Reservation struct {
	JobID     int64   `gorm:"primaryKey;autoIncrement:false"`
	Seq       int     `gorm:"not null"`
	GPUs      string  `gorm:"column:gpus;type:text;not null;default:''"`
	Count     int     `gorm:"not null"`
	FromS     float64 `gorm:"column:from_s;not null"`
	DueS      float64 `gorm:"column:due_s;not null"`
	UpdatedAt time.Time
}

func (v45Reservation) TableName() string { return "reservations" }

func reservationsTable(tx *gorm.DB) error {
	return createTables(tx, &v45Reservation{})
}
