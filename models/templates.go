package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// JobTemplate is a job a user saved to submit again. Body is the submit
// request as JSON, exactly as the API takes it.
type JobTemplate struct {
	ID        int64  `gorm:"primaryKey"`
	User      string `gorm:"size:64;not null;uniqueIndex:idx_template_user_name"`
	Name      string `gorm:"size:128;not null;uniqueIndex:idx_template_user_name"`
	Body      string `gorm:"type:text;not null"`
	CreatedAt time.Time
}

// CreateTemplate saves a template; a user's template names are unique.
func (s *Store) CreateTemplate(ctx context.Context, t *JobTemplate) error {
	if err := s.db.WithContext(ctx).Create(t).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return fmt.Errorf("template %q: %w", t.Name, ErrExists)
		}
		return fmt.Errorf("create template %q: %w", t.Name, err)
	}
	return nil
}

// Templates lists a user's templates by name.
func (s *Store) Templates(ctx context.Context, user string) ([]JobTemplate, error) {
	var ts []JobTemplate
	if err := s.db.WithContext(ctx).Where("\"user\" = ?", user).Order("name").Find(&ts).Error; err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	return ts, nil
}

// Template returns template id of user.
func (s *Store) Template(ctx context.Context, user string, id int64) (*JobTemplate, error) {
	var t JobTemplate
	if err := s.db.WithContext(ctx).Where("id = ? AND \"user\" = ?", id, user).First(&t).Error; err != nil {
		return nil, notFound(err, fmt.Sprintf("template %d", id))
	}
	return &t, nil
}

// DeleteTemplate removes template id of user.
func (s *Store) DeleteTemplate(ctx context.Context, user string, id int64) error {
	res := s.db.WithContext(ctx).Where("id = ? AND \"user\" = ?", id, user).Delete(&JobTemplate{})
	if res.Error != nil {
		return fmt.Errorf("delete template %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("template %d: %w", id, ErrNotFound)
	}
	return nil
}
