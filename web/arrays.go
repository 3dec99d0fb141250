package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// Arrays (sweeps) and resubmissions: an array is the tasks one
// submission made (submit_job.go), named by its first task's ID; each task
// is a job of its own, cancelled alone from its page or with all the
// others from the array's.

// arrayFor returns the tasks of array id, by index, if u may see them;
// an array of a team u may not see is one that does not exist (noSuch).
func (s *Server) arrayFor(ctx context.Context, u *models.User, id int64) ([]models.Job, error) {
	tasks, err := s.cfg.Store.ArrayTasks(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(tasks) == 0 || !canSee(u, tasks[0].Team) {
		return nil, noSuch("array", id)
	}
	return tasks, nil
}

// arrayOf is an array as the API shows it.
func (s *Server) arrayOf(m *moment, tasks []models.Job) api.Array {
	first := tasks[0]
	out := api.Array{ID: first.ArrayID, Name: first.Name, Team: first.Team, User: first.User, Limit: first.ArrayLimit,
		States: map[job.State]int{}, Tasks: make([]api.Job, len(tasks))}
	if i := len(first.Name) - len(fmt.Sprintf("[%d]", first.ArrayIndex)); i > 0 {
		out.Name = first.Name[:i]
	}
	for i := range tasks {
		out.Tasks[i] = m.job(&tasks[i])
		out.States[tasks[i].State]++
	}
	return out
}

// cancelArray cancels every unfinished task of array id for a, and
// returns how many it asked to cancel.
func (s *Server) cancelArray(ctx context.Context, a actor, id int64) (int, error) {
	tasks, err := s.arrayFor(ctx, a.user, id)
	if err != nil {
		return 0, err
	}
	if !canCancel(a.user, &tasks[0]) {
		return 0, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("array %d belongs to %s: only its owner, the lead of %s or an admin may cancel it", id, tasks[0].User, tasks[0].Team))
	}
	n := 0
	for _, t := range tasks {
		if t.State.Final() {
			continue
		}
		err := s.cfg.Engine.Cancel(ctx, t.ID, fmt.Sprintf("cancelled with array %d by %s", id, a.user.Name))
		if errors.Is(err, models.ErrConflict) {
			continue // it ended meanwhile
		}
		if err != nil {
			return n, err
		}
		n++
	}
	s.cfg.Logger.Info("array cancel requested", "array", id, "tasks", n, "by", a.user.Name)
	if a.user.Name != tasks[0].User {
		if err := s.auditBy(ctx, a, "array.cancel", fmt.Sprintf("array %d of %s", id, tasks[0].User), fmt.Sprintf("%d tasks", n)); err != nil {
			return n, err
		}
	}
	return n, nil
}

// resubmitJob submits job id again, with its fields as they were: a new
// job of the same owner, which runs as its owner, whoever asks, as
// Slurm's scontrol requeue keeps a job's owner. Its owner, its team's
// lead or an admin may ask (as they may cancel it); the submission is
// checked as the owner's (team, caps), and one by another than the
// owner is recorded in the audit log. A job never runs another's
// command under the account of whoever clicked.
func (s *Server) resubmitJob(ctx context.Context, a actor, id int64) (*models.Job, fieldErrors, error) {
	j, err := s.jobFor(ctx, a.user, id)
	if err != nil {
		return nil, nil, err
	}
	if !canCancel(a.user, j) {
		return nil, nil, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("job %d is %s's: only its owner, the lead of %s or an admin may resubmit it", j.ID, j.User, j.Team))
	}
	owner := a.user
	if j.User != a.user.Name {
		owner, err = s.cfg.Store.UserByName(ctx, j.User)
		if errors.Is(err, models.ErrNotFound) {
			return nil, nil, echo.NewHTTPError(http.StatusConflict, fmt.Sprintf("job %d's owner %s has no account any more: it cannot run as them again", j.ID, j.User))
		}
		if err != nil {
			return nil, nil, err
		}
		if owner.Disabled() {
			return nil, nil, echo.NewHTTPError(http.StatusConflict, fmt.Sprintf("job %d's owner %s is disabled: it cannot run as them again", j.ID, j.User))
		}
	}
	nj, fe, err := s.submitJob(ctx, actor{user: owner, from: a.from}, requestOf(j))
	if err != nil || fe != nil {
		return nil, fe, err
	}
	if owner.Name != a.user.Name {
		s.cfg.Logger.Info("job resubmitted for its owner", "job", j.ID, "as", nj.ID, "owner", owner.Name, "by", a.user.Name)
		if err := s.auditBy(ctx, a, "job.resubmit", fmt.Sprintf("job %d of %s", j.ID, owner.Name), fmt.Sprintf("as job %d, %s's", nj.ID, owner.Name)); err != nil {
			return nil, nil, err
		}
	}
	return nj, nil, nil
}

// resubmitForm is the job page's "Resubmit as OWNER" (for its lead or an
// admin): the job again, its owner's, then its page.
func (s *Server) resubmitForm(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	j, fe, err := s.resubmitJob(c.Request().Context(), actorOf(c), id)
	if err != nil {
		return err
	}
	if fe != nil {
		return echo.NewHTTPError(http.StatusBadRequest, fe.first())
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
	m, err := s.shownMoment(ctx, tasks...)
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
	if _, err := s.cancelArray(ctx, actorOf(c), id); err != nil {
		return err
	}
	tasks, err := s.arrayFor(ctx, currentUser(c), id)
	if err != nil {
		return err
	}
	m, err := s.shownMoment(ctx, tasks...)
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
	j, fe, err := s.resubmitJob(c.Request().Context(), actorOf(c), id)
	if err != nil {
		return err
	}
	if fe != nil {
		return echo.NewHTTPError(http.StatusBadRequest, fe.first())
	}
	return s.jobResponse(c, http.StatusCreated, j)
}
