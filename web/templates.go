package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/models"
)

// TemplateJSON is a saved job, ready to submit again.
type TemplateJSON struct {
	ID   int64             `json:"id"`
	Name string            `json:"name"`
	Job  api.SubmitRequest `json:"job"`
}

func templateJSON(t models.JobTemplate) (TemplateJSON, error) {
	out := TemplateJSON{ID: t.ID, Name: t.Name}
	if err := json.Unmarshal([]byte(t.Body), &out.Job); err != nil {
		return out, fmt.Errorf("template %d: %w", t.ID, err)
	}
	return out, nil
}

// saveTemplate checks that req is a job the user may submit and saves it.
func (s *Server) saveTemplate(c echo.Context, name string, req api.SubmitRequest) (TemplateJSON, error) {
	if name == "" || len(name) > app.MaxJobName || strings.TrimSpace(name) != name {
		return TemplateJSON{}, badRequest("name: is required: 1 to %d characters, not beginning or ending with white space", app.MaxJobName)
	}
	if err := s.app.CheckSubmit(c.Request().Context(), appActor(c), req); err != nil {
		if fe := fieldErrorsOf(err); fe != nil {
			return TemplateJSON{}, badRequest("job.%s", fe.First())
		}
		return TemplateJSON{}, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return TemplateJSON{}, err
	}
	t := &models.JobTemplate{User: currentUser(c).Name, Name: name, Body: string(body)}
	if err := s.cfg.Store.CreateTemplate(c.Request().Context(), t); errors.Is(err, models.ErrExists) {
		return TemplateJSON{}, badRequest("name: you already have a template called %q", name)
	} else if err != nil {
		return TemplateJSON{}, err
	}
	return TemplateJSON{ID: t.ID, Name: t.Name, Job: req}, nil
}

func (s *Server) userTemplates(c echo.Context) ([]TemplateJSON, error) {
	ts, err := s.cfg.Store.Templates(c.Request().Context(), currentUser(c).Name)
	if err != nil {
		return nil, err
	}
	out := []TemplateJSON{}
	for _, t := range ts {
		tj, err := templateJSON(t)
		if err != nil {
			return nil, err
		}
		out = append(out, tj)
	}
	return out, nil
}

func (s *Server) apiTemplates(c echo.Context) error {
	ts, err := s.userTemplates(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ts)
}

func (s *Server) apiCreateTemplate(c echo.Context) error {
	var in struct {
		Name string            `json:"name"`
		Job  api.SubmitRequest `json:"job"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	t, err := s.saveTemplate(c, in.Name, in.Job)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

func templateID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, echo.NewHTTPError(http.StatusBadRequest, "id: must be a positive number")
	}
	return id, nil
}

func (s *Server) deleteTemplate(c echo.Context) error {
	id, err := templateID(c)
	if err != nil {
		return err
	}
	err = s.cfg.Store.DeleteTemplate(c.Request().Context(), currentUser(c).Name, id)
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("you have no template %d", id))
	}
	return err
}

func (s *Server) apiDeleteTemplate(c echo.Context) error {
	if err := s.deleteTemplate(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// saveTemplateForm saves the job shown on a job page as a template.
func (s *Server) saveTemplateForm(c echo.Context) error {
	j, err := s.loadJob(c)
	if err != nil {
		return err
	}
	t, err := s.saveTemplate(c, c.FormValue("template_name"), app.RequestOf(j))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/jobs/new?template=%d", t.ID))
}

func (s *Server) deleteTemplateForm(c echo.Context) error {
	if err := s.deleteTemplate(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/jobs/new")
}
