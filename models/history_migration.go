package models

import "gorm.io/gorm"

// The tables of the GPU history (history.go), frozen as the migration
// step that creates them made them.

type v4GPUHistory struct {
	Step          int      `gorm:"column:step;primaryKey;autoIncrement:false"`
	Start         int64    `gorm:"column:start;primaryKey;autoIncrement:false"`
	GPU           string   `gorm:"column:gpu;primaryKey;size:64"`
	Node          string   `gorm:"column:node;size:64;not null"`
	GPUIndex      int      `gorm:"column:gpu_index;not null"`
	Samples       int      `gorm:"column:samples;not null"`
	MemMiB        int64    `gorm:"column:mem_mib"`
	MemUsedAvgMiB float64  `gorm:"column:mem_used_avg_mib"`
	MemUsedMaxMiB int64    `gorm:"column:mem_used_max_mib"`
	UtilAvgPct    float64  `gorm:"column:util_avg_pct"`
	BusySamples   int      `gorm:"column:busy_samples"`
	PowerAvgW     *float64 `gorm:"column:power_avg_w"`
	TempAvgC      *float64 `gorm:"column:temp_avg_c"`
}

func (v4GPUHistory) TableName() string { return "gpu_history" }

type v4ClusterHistory struct {
	Start     int64 `gorm:"column:start;primaryKey;autoIncrement:false"`
	Queued    int
	Running   int
	Preempted int
}

func (v4ClusterHistory) TableName() string { return "cluster_history" }

// historyTables creates the GPU and cluster history tables.
func historyTables(tx *gorm.DB) error {
	return createTables(tx, &v4GPUHistory{}, &v4ClusterHistory{})
}
