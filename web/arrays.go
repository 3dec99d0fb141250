package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/job"
)

// Arrays (sweeps) and resubmissions: an array is the tasks one
// submission made (app/validate.go), named by its first task's ID; each task
// is a job of its own, cancelled alone from its page or with all the
// others from the array's.

// arrayFor returns the tasks of array id, by index, if u may see them
// (app.App.Array).
func (s *Server) arrayFor(ctx context.Context, u *app.User, id int64) ([]app.Job, error) {
	return s.app.Array(ctx, app.Actor{User: u}, id)
}

// arrayOf is an array as the API shows it.
func (s *Server) arrayOf(m *app.Moment, tasks []app.Job) api.Array {
	first := tasks[0]
	out := api.Array{ID: first.ArrayID, Name: first.Name, Team: first.Team, User: first.User, Limit: first.ArrayLimit,
		States: map[job.State]int{}, Tasks: make([]api.Job, len(tasks))}
	if i := len(first.Name) - len(fmt.Sprintf("[%d]", first.ArrayIndex)); i > 0 {
		out.Name = first.Name[:i]
	}
	for i := range tasks {
		out.Tasks[i] = m.Job(&tasks[i])
		out.States[tasks[i].State]++
	}
	return out
}

// resubmitForm is the job page's "Resubmit as OWNER" (for its lead or an
// admin): the job again, its owner's, then its page.
func (s *Server) resubmitForm(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	j, err := s.app.Resubmit(c.Request().Context(), appActor(c), id)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/jobs/%d", j.ID))
}

func (s *Server) apiGetArray(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	tasks, err := s.arrayFor(ctx, currentUser(c), id)
	if err != nil {
		return err
	}
	m, err := s.app.ShownMoment(ctx, tasks...)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.arrayOf(m, tasks))
}

func (s *Server) apiCancelArray(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.app.CancelArray(ctx, appActor(c), id); err != nil {
		return err
	}
	tasks, err := s.arrayFor(ctx, currentUser(c), id)
	if err != nil {
		return err
	}
	m, err := s.app.ShownMoment(ctx, tasks...)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.arrayOf(m, tasks))
}

func (s *Server) apiResubmit(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	if err := noFields(c); err != nil {
		return err
	}
	j, err := s.app.Resubmit(c.Request().Context(), appActor(c), id)
	if err != nil {
		return err
	}
	return s.jobResponse(c, http.StatusCreated, j)
}
