package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
)

// apiJobHistory returns each state the job entered, when and why.
func (s *Server) apiJobHistory(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	h, err := s.app.JobHistory(c.Request().Context(), appActor(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, h)
}

func (s *Server) apiMe(c echo.Context) error {
	u := currentUser(c)
	return c.JSON(http.StatusOK, app.MeOf(u))
}

func (s *Server) apiSubmit(c echo.Context) error {
	var req api.SubmitRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	j, replayed, err := s.app.SubmitOnce(ctx, appActor(c), c.Request().Header.Get("Idempotency-Key"), req)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/api/v1/jobs/%d", j.ID))
	if replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
	}
	if err := s.jobResponse(c, http.StatusCreated, j); err != nil {
		// The job is stored: the answer says so, though the figures
		// around it cannot be read now (a retry would find it again by
		// its key, but one without a key would submit it twice).
		s.cfg.Logger.Warn("job submitted, its full answer not", "job", j.ID, "err", err)
		return c.JSON(http.StatusCreated, api.Job{ID: j.ID, Name: j.Name, Team: j.Team, User: j.User, GPUs: j.GPUs, State: j.State, Reason: j.Reason})
	}
	return nil
}

// jobResponse answers with j as the API shows it now, with its use of
// its GPUs (without the points) and its idle verdict.
func (s *Server) jobResponse(c echo.Context, status int, j *app.Job) error {
	ctx := c.Request().Context()
	m, err := s.app.ShownMoment(ctx, *j)
	if err != nil {
		return err
	}
	out := s.app.JobOf(m, j)
	s.withSessionURL(currentUser(c), j, &out)
	u, err := s.app.JobUsage(ctx, j, m.Now, false)
	if err != nil {
		return err
	}
	out.Usage, out.Idle = &u, u.Idle
	out.CheckpointCopies = s.app.CheckpointCopies(j.ID)
	return c.JSON(status, out)
}

// apiListJobs lists the jobs the user may see, newest first, filtered
// and paged (joblist.go): the cursors of the pages around come back in
// X-Next-Cursor, X-Prev-Cursor and Link.
func (s *Server) apiListJobs(c echo.Context) error {
	if err := onlyParams(c.QueryParams(), jobListParams); err != nil {
		return err
	}
	q, err := readJobListQuery(c, maxListLimit)
	if err != nil {
		return err
	}
	p, err := s.listJobs(c, q)
	if err != nil {
		return err
	}
	m, err := s.app.ShownMoment(c.Request().Context(), p.Jobs...)
	if err != nil {
		return err
	}
	out := make([]api.Job, len(p.Jobs))
	for i := range p.Jobs {
		out[i] = s.app.JobOf(m, &p.Jobs[i])
	}
	if err := s.app.AddIdle(c.Request().Context(), p.Jobs, out, m.Now); err != nil {
		return err
	}
	setPageHeaders(c, q, p)
	return c.JSON(http.StatusOK, out)
}

// loadJob returns the job named by the :id parameter if the user may see it.
func (s *Server) loadJob(c echo.Context) (*app.Job, error) {
	id, err := jobIDParam(c)
	if err != nil {
		return nil, err
	}
	return s.jobFor(c.Request().Context(), currentUser(c), id)
}

// jobIDParam reads the :id parameter.
func jobIDParam(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, echo.NewHTTPError(http.StatusBadRequest, "id: must be a positive number")
	}
	return id, nil
}

func (s *Server) apiGetJob(c echo.Context) error {
	j, err := s.loadJob(c)
	if err != nil {
		return err
	}
	return s.jobResponse(c, http.StatusOK, j)
}

func (s *Server) apiCancel(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	j, err := s.app.Cancel(c.Request().Context(), appActor(c), id)
	if err != nil {
		return err
	}
	return s.jobResponse(c, http.StatusOK, j)
}
