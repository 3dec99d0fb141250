package models

import (
	"context"
	"fmt"
	"time"
)

// AuditEntry records who did what to what, when and from where: role
// changes, quota changes, cancels of other users' jobs, drains, tokens.
type AuditEntry struct {
	ID     int64     `gorm:"primaryKey"`
	At     time.Time `gorm:"index;not null"`
	Actor  string    `gorm:"size:64;not null"`
	Action string    `gorm:"size:64;not null"`
	Target string    `gorm:"size:128"`
	Detail string    `gorm:"size:512"`
	From   string    `gorm:"size:64"` // client address, or "cli"
}

// Audit appends an entry to the audit log.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	if err := s.db.WithContext(ctx).Create(&e).Error; err != nil {
		return fmt.Errorf("audit %s %s: %w", e.Action, e.Target, err)
	}
	return nil
}

// AuditLog returns the newest entries first, at most limit of them.
func (s *Store) AuditLog(ctx context.Context, limit int) ([]AuditEntry, error) {
	var es []AuditEntry
	if err := s.db.WithContext(ctx).Order("id DESC").Limit(limit).Find(&es).Error; err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return es, nil
}
