package web

import (
	"fmt"
	"net/http"
	"strconv"

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

// templateJSON is t as the API shows it (app.TemplateOf).
func templateJSON(t models.JobTemplate) (TemplateJSON, error) {
	tj, err := app.TemplateOf(t)
	return TemplateJSON(tj), err
}

// saveTemplate saves req as the user's template name, a job they may
// submit (app.App.SaveTemplate).
func (s *Server) saveTemplate(c echo.Context, name string, req api.SubmitRequest) (TemplateJSON, error) {
	t, err := s.app.SaveTemplate(c.Request().Context(), appActor(c), name, req)
	return TemplateJSON(t), err
}

func (s *Server) userTemplates(c echo.Context) ([]TemplateJSON, error) {
	ts, err := s.app.Templates(c.Request().Context(), appActor(c))
	if err != nil {
		return nil, err
	}
	out := make([]TemplateJSON, len(ts))
	for i, t := range ts {
		out[i] = TemplateJSON(t)
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
	return s.app.DeleteTemplate(c.Request().Context(), appActor(c), id)
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
