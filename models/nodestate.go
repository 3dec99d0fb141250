package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// The machines' scheduling state, kept so that it outlives a server
// restart and a change of leader replica (engine.NodeStateStore, through
// package enginestore): which machines are cordoned or draining, and which
// GPUs are out of service.

// NodeHold is a machine that takes no new jobs: an admin cordoned it, or
// an admin or Slurm drains it. A row with neither is a machine that was
// once held.
type NodeHold struct {
	Node      string `gorm:"primaryKey;size:64"`
	Cordoned  bool   `gorm:"not null;default:false"`
	Draining  bool   `gorm:"not null;default:false"`
	UpdatedAt time.Time
}

func (NodeHold) TableName() string { return "node_holds" }

// GPUFault is a GPU out of service because it reported an error, until an
// admin clears it.
type GPUFault struct {
	Node     string    `gorm:"primaryKey;size:64"`
	GPUIndex int       `gorm:"column:gpu_index;primaryKey;autoIncrement:false"`
	Reason   string    `gorm:"size:512;not null"`
	At       time.Time `gorm:"not null"`
}

func (GPUFault) TableName() string { return "gpu_faults" }

// HeldNodes returns the machines that take no new jobs: cordoned or
// draining.
func (s *Store) HeldNodes(ctx context.Context) ([]NodeHold, error) {
	var holds []NodeHold
	if err := s.db.WithContext(ctx).Where("cordoned OR draining").Find(&holds).Error; err != nil {
		return nil, fmt.Errorf("read node holds: %w", err)
	}
	return holds, nil
}

// GPUFaults returns the GPUs out of service, by machine and index.
func (s *Store) GPUFaults(ctx context.Context) ([]GPUFault, error) {
	var faults []GPUFault
	if err := s.db.WithContext(ctx).Order("node, gpu_index").Find(&faults).Error; err != nil {
		return nil, fmt.Errorf("read GPU faults: %w", err)
	}
	return faults, nil
}

// SetNodeCordoned records a machine's cordon (on) or its end (off).
func (s *Store) SetNodeCordoned(ctx context.Context, node string, on bool, now time.Time) error {
	return s.setNodeHold(ctx, NodeHold{Node: node, Cordoned: on, UpdatedAt: now}, "cordoned")
}

// SetNodeDraining records a machine's drain (on) or its end (off).
func (s *Store) SetNodeDraining(ctx context.Context, node string, on bool, now time.Time) error {
	return s.setNodeHold(ctx, NodeHold{Node: node, Draining: on, UpdatedAt: now}, "draining")
}

// setNodeHold sets column of h's machine, leaving its other hold alone.
func (s *Store) setNodeHold(ctx context.Context, h NodeHold, column string) error {
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "node"}},
		DoUpdates: clause.AssignmentColumns([]string{column, "updated_at"}),
	}).Create(&h).Error
	if err != nil {
		return fmt.Errorf("record %s of %s: %w", column, h.Node, err)
	}
	return nil
}

// RecordGPUFault takes a GPU out of service; for a GPU already out, the
// new fault replaces the one before, as in the engine.
func (s *Store) RecordGPUFault(ctx context.Context, f GPUFault) error {
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&f).Error
	if err != nil {
		return fmt.Errorf("record fault of GPU %s/%d: %w", f.Node, f.GPUIndex, err)
	}
	return nil
}

// DeleteGPUFault puts a GPU back in service.
func (s *Store) DeleteGPUFault(ctx context.Context, node string, index int) error {
	err := s.db.WithContext(ctx).Where("node = ? AND gpu_index = ?", node, index).Delete(&GPUFault{}).Error
	if err != nil {
		return fmt.Errorf("clear fault of GPU %s/%d: %w", node, index, err)
	}
	return nil
}
