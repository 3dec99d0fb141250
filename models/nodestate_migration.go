package models

import (
	"time"

	"gorm.io/gorm"
)

// The tables of the machines' scheduling state (nodestate.go), frozen as
// the migration step that creates them made them.

type v7NodeHold struct {
	Node      string `gorm:"primaryKey;size:64"`
	Cordoned  bool   `gorm:"not null;default:false"`
	Draining  bool   `gorm:"not null;default:false"`
	UpdatedAt time.Time
}

func (v7NodeHold) TableName() string { return "node_holds" }

type v7GPUFault struct {
	Node     string    `gorm:"primaryKey;size:64"`
	GPUIndex int       `gorm:"column:gpu_index;primaryKey;autoIncrement:false"`
	Reason   string    `gorm:"size:512;not null"`
	At       time.Time `gorm:"not null"`
}

func (v7GPUFault) TableName() string { return "gpu_faults" }

func nodeStateTables(tx *gorm.DB) error {
	return createTables(tx, &v7NodeHold{}, &v7GPUFault{})
}
