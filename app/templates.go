package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// Job templates: a user's saved jobs, ready to submit again; each user
// sees and changes their own only.

// TemplateStore is what the actions on templates read and write.
type TemplateStore interface {
	CreateTemplate(ctx context.Context, t *models.JobTemplate) error
	Templates(ctx context.Context, user string) ([]models.JobTemplate, error)
	Template(ctx context.Context, user string, id int64) (*models.JobTemplate, error)
	DeleteTemplate(ctx context.Context, user string, id int64) error
}

// Template is a saved job.
type Template struct {
	ID   int64
	Name string
	Job  api.SubmitRequest
}

// SaveTemplate saves req, a job a may submit, as a's template name.
func (s *App) SaveTemplate(ctx context.Context, a Actor, name string, req api.SubmitRequest) (Template, error) {
	if name == "" || len(name) > MaxJobName || strings.TrimSpace(name) != name {
		return Template{}, invalid("name", "name: is required: 1 to %d characters, not beginning or ending with white space", MaxJobName)
	}
	if err := s.CheckSubmit(ctx, a, req); err != nil {
		var ae *Error
		if errors.As(err, &ae) && ae.Kind == Invalid && ae.Fields != nil {
			return Template{}, invalid("job."+ae.Fields.firstField(), "job.%s", ae.Fields.First())
		}
		return Template{}, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Template{}, fmt.Errorf("template %q: %w", name, err)
	}
	t := &models.JobTemplate{User: a.User.Name, Name: name, Body: string(body)}
	if err := s.cfg.Store.CreateTemplate(ctx, t); errors.Is(err, models.ErrExists) {
		return Template{}, invalid("name", "name: you already have a template called %q", name)
	} else if err != nil {
		return Template{}, stored(err)
	}
	return Template{ID: t.ID, Name: t.Name, Job: req}, nil
}

// Templates lists a's own templates.
func (s *App) Templates(ctx context.Context, a Actor) ([]Template, error) {
	ts, err := s.cfg.Store.Templates(ctx, a.User.Name)
	if err != nil {
		return nil, stored(err)
	}
	out := make([]Template, 0, len(ts))
	for _, t := range ts {
		tj, err := templateOf(t)
		if err != nil {
			return nil, err
		}
		out = append(out, tj)
	}
	return out, nil
}

// Template returns a's own template id.
func (s *App) Template(ctx context.Context, a Actor, id int64) (Template, error) {
	t, err := s.cfg.Store.Template(ctx, a.User.Name, id)
	if errors.Is(err, models.ErrNotFound) {
		return Template{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("you have no template %d", id), Err: err}
	}
	if err != nil {
		return Template{}, stored(err)
	}
	return templateOf(*t)
}

// templateOf is t as a Template, its job read back.
func templateOf(t models.JobTemplate) (Template, error) {
	out := Template{ID: t.ID, Name: t.Name}
	if err := json.Unmarshal([]byte(t.Body), &out.Job); err != nil {
		return out, fmt.Errorf("template %d: %w", t.ID, err)
	}
	return out, nil
}

// DeleteTemplate deletes a's template id.
func (s *App) DeleteTemplate(ctx context.Context, a Actor, id int64) error {
	err := s.cfg.Store.DeleteTemplate(ctx, a.User.Name, id)
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("you have no template %d", id), Err: err}
	}
	return stored(err)
}
