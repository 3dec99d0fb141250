package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// JobJSON is a job as the API shows it.
type JobJSON struct {
	ID              int64      `json:"id"`
	Name            string     `json:"name"`
	Team            string     `json:"team"`
	User            string     `json:"user"`
	GPUs            int        `json:"gpus"`
	State           job.State  `json:"state"`
	Reason          string     `json:"reason"`
	Command         []string   `json:"command,omitempty"`
	Sim             *SimSpec   `json:"sim,omitempty"`
	GPUMemGB        float64    `json:"gpu_mem_gb,omitempty"`
	Model           string     `json:"model,omitempty"`
	Queue           int        `json:"queue"`
	SubmittedAt     time.Time  `json:"submitted_at"`
	StartedAt       *time.Time `json:"started_at"`
	FinishedAt      *time.Time `json:"finished_at"`
	JCTS            *float64   `json:"jct_s"`
	Placement       []string   `json:"placement"`
	ExitCode        *int       `json:"exit_code"`
	ExecutedS       float64    `json:"executed_s"`
	AttainedService float64    `json:"attained_service_gpu_s"`
	Preemptions     int        `json:"preemptions"`
	Failures        int        `json:"failures"`
	RetryAt         *time.Time `json:"retry_at"`
	// Held: the job waits but is never scheduled (a sharing job requeued
	// too often for outgrowing its lane without progress); Reason says
	// why and what to do.
	Held bool `json:"held"`
	// EstimatedStartAt is when a waiting job is expected to start (see
	// GET /api/v1/stats/estimates for how good the estimates have been).
	EstimatedStartAt *time.Time `json:"estimated_start_at"`
	// Borrowed: the job runs beyond its team's guarantee and may be reclaimed.
	Borrowed bool `json:"borrowed"`
	// Salus sharing: whether the job shares its GPU, the fraction of a
	// GPU it asked for (0: none), its memory estimate (unpadded; measured
	// after it outgrew a lane), and while it runs, its lane.
	Sharing        bool          `json:"sharing"`
	GPUFraction    float64       `json:"gpu_fraction,omitempty"`
	MemoryEstimate *EstimateJSON `json:"memory_estimate,omitempty"`
	BatchSize      int           `json:"batch_size,omitempty"`
	Parameters     int64         `json:"parameters,omitempty"`
	Lane           *JobLaneJSON  `json:"lane,omitempty"`
	// CPUProfile is the CPU and host memory sensitivity profile the user
	// declared at submission (source "declared"); absent when none was.
	CPUProfile *CPUProfileJSON `json:"cpu_profile,omitempty"`
	// Resources are a running job's CPUs and host memory: allocated and
	// used per node, and its sensitivity profile (docs/synergy.md).
	Resources *JobResourcesJSON `json:"resources,omitempty"`
}

// EventJSON is one step of a job's history.
type EventJSON struct {
	At     time.Time `json:"at"`
	State  job.State `json:"state"`
	Detail string    `json:"detail"`
}

func (s *Server) jobHistory(c echo.Context, id int64) ([]EventJSON, error) {
	es, err := s.cfg.Store.JobEvents(c.Request().Context(), id)
	if err != nil {
		return nil, err
	}
	out := make([]EventJSON, len(es))
	for i, e := range es {
		out[i] = EventJSON{At: e.At, State: e.State, Detail: e.Detail}
	}
	return out, nil
}

// apiJobHistory returns each state the job entered, when and why.
func (s *Server) apiJobHistory(c echo.Context) error {
	j, err := s.loadJob(c)
	if err != nil {
		return err
	}
	h, err := s.jobHistory(c, j.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, h)
}

// jobJSON is j as the API shows it, with its estimated start if it waits.
func (s *Server) jobJSON(j *models.Job) JobJSON {
	out := jobJSON(j)
	out.Borrowed = j.State == job.Running && s.cfg.Engine.Borrowed(j.ID)
	if j.Sharing && j.State == job.Running {
		out.Lane = s.jobLane(j.ID)
	}
	if j.State == job.Running {
		out.Resources = s.jobResources(j.ID)
	}
	if j.State.Waiting() {
		if t, ok := s.cfg.Engine.EstimatedStart(j.ID); ok {
			out.EstimatedStartAt = &t
		}
	}
	return out
}

func jobJSON(j *models.Job) JobJSON {
	out := JobJSON{
		ID: j.ID, Name: j.Name, Team: j.Team, User: j.User, GPUs: j.GPUs, State: j.State,
		Reason: j.Reason, Command: j.Command, GPUMemGB: float64(j.GPUMemMiB) / 1024,
		SubmittedAt: j.SubmittedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
		Placement: j.Placement, ExitCode: j.ExitCode, ExecutedS: j.ExecutedS,
		AttainedService: j.AttainedService, Preemptions: j.Preemptions,
		Model: j.Model, Queue: j.QueueIndex, Failures: j.Failures, RetryAt: j.RetryAt, Held: j.Held(),
	}
	if out.Placement == nil {
		out.Placement = []string{}
	}
	out.Sharing, out.GPUFraction, out.BatchSize, out.Parameters = j.Sharing, j.GPUFraction, j.BatchSize, j.Parameters
	out.CPUProfile = declaredProfileJSON(j)
	if j.MemPersistentMiB > 0 || j.MemEphemeralMiB > 0 {
		out.MemoryEstimate = &EstimateJSON{PersistentMiB: j.MemPersistentMiB, EphemeralMiB: j.MemEphemeralMiB, Source: j.MemSource}
	}
	if len(j.Command) == 0 {
		out.Sim = &SimSpec{DurationS: j.SimDuration}
	}
	if j.FinishedAt != nil {
		jct := j.JCT().Seconds()
		out.JCTS = &jct
	}
	return out
}

func (s *Server) apiMe(c echo.Context) error {
	u := currentUser(c)
	return c.JSON(http.StatusOK, map[string]string{"name": u.Name, "role": string(u.Role), "team": u.Team})
}

func (s *Server) apiSubmit(c echo.Context) error {
	var req SubmitRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	j, err := s.submit(c, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, s.jobJSON(j))
}

// decodeJSON reads the request's JSON body into v, refusing unknown
// fields; its errors are 400s that name the field at fault.
func decodeJSON(c echo.Context, v any) error {
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, jsonError(err))
	}
	return nil
}

// jsonError explains a decoding error in terms of the request's fields.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return fmt.Sprintf("%s: must be %s", field, jsonKind(te.Type))
	case errors.As(err, &se):
		return fmt.Sprintf("body is not valid JSON (at byte %d)", se.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "body is not valid JSON (it ends too early)"
	case errors.Is(err, io.EOF):
		return "body is empty: send the job as JSON"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names what a JSON value of Go type t looks like, for people.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a JSON object"
}

// submit validates req for the current user and stores the job.
func (s *Server) submit(c echo.Context, req SubmitRequest) (*models.Job, error) {
	j, fe, err := s.validateSubmit(c, req)
	if err != nil {
		return nil, err
	}
	if fe != nil {
		return nil, echo.NewHTTPError(http.StatusBadRequest, fe.first())
	}
	return j, s.createJob(c, j)
}

func (s *Server) validateSubmit(c echo.Context, req SubmitRequest) (*models.Job, fieldErrors, error) {
	teams, err := s.teamNames(c)
	if err != nil {
		return nil, nil, err
	}
	j, fe := req.validate(currentUser(c), teams, s.clusterGPUs())
	return j, fe, nil
}

func (s *Server) createJob(c echo.Context, j *models.Job) error {
	j.SubmittedAt = s.cfg.Now()
	if err := s.cfg.Store.CreateJob(c.Request().Context(), j); err != nil {
		return err
	}
	s.cfg.Engine.Wake()
	s.cfg.Logger.Info("job submitted", "job", j.ID, "user", j.User, "team", j.Team, "gpus", j.GPUs)
	return nil
}

func (s *Server) teamNames(c echo.Context) ([]string, error) {
	ts, err := s.cfg.Store.Teams(c.Request().Context())
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names, nil
}

func (s *Server) clusterGPUs() int {
	n := 0
	for _, node := range s.cfg.Engine.Nodes() {
		n += len(node.Devices())
	}
	return n
}

func (s *Server) apiListJobs(c echo.Context) error {
	f, err := s.jobFilter(c, c.QueryParam("scope"), c.QueryParam("state"))
	if err != nil {
		return err
	}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return echo.NewHTTPError(http.StatusBadRequest, "limit: must be a number from 1 to 1000")
		}
		f.Limit = n
	}
	js, err := s.cfg.Store.ListJobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := make([]JobJSON, len(js))
	for i := range js {
		out[i] = s.jobJSON(&js[i])
	}
	return c.JSON(http.StatusOK, out)
}

// jobFilter turns the scope ("mine", "team", "all") and state a user asks
// for into a filter within what the user may see.
func (s *Server) jobFilter(c echo.Context, scope, state string) (models.JobFilter, error) {
	u := currentUser(c)
	var f models.JobFilter
	switch scope {
	case "mine":
		f.User = u.Name
	case "", "team":
		if u.Role != models.RoleAdmin || scope == "team" {
			f.Team = u.Team
		}
	case "all":
		if u.Role != models.RoleAdmin {
			return f, echo.NewHTTPError(http.StatusForbidden, "scope: only admins may list all jobs")
		}
	default:
		return f, echo.NewHTTPError(http.StatusBadRequest, "scope: must be mine, team or all")
	}
	if state != "" {
		st := job.State(state)
		if !st.Valid() {
			return f, echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("state: unknown state %q", state))
		}
		f.States = []job.State{st}
	}
	return f, nil
}

// loadJob returns the job named by the :id parameter if the user may see it.
func (s *Server) loadJob(c echo.Context) (*models.Job, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return nil, echo.NewHTTPError(http.StatusBadRequest, "id: must be a positive number")
	}
	j, err := s.cfg.Store.Job(c.Request().Context(), id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("job %d not found", id))
	}
	if err != nil {
		return nil, err
	}
	if !canSee(currentUser(c), j.Team) {
		return nil, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("job %d belongs to team %s", id, j.Team))
	}
	return j, nil
}

func (s *Server) apiGetJob(c echo.Context) error {
	j, err := s.loadJob(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.jobJSON(j))
}

func (s *Server) apiCancel(c echo.Context) error {
	j, err := s.cancel(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.jobJSON(j))
}

// cancel cancels the job named by :id for the current user and returns it
// as it is afterwards (a running job may still be stopping).
func (s *Server) cancel(c echo.Context) (*models.Job, error) {
	j, err := s.loadJob(c)
	if err != nil {
		return nil, err
	}
	u := currentUser(c)
	if !canCancel(u, j) {
		return nil, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("job %d belongs to %s: only its owner, the lead of %s or an admin may cancel it", j.ID, j.User, j.Team))
	}
	if j.State.Final() {
		return nil, echo.NewHTTPError(http.StatusConflict, fmt.Sprintf("job %d has already ended (%s)", j.ID, j.State))
	}
	ctx := c.Request().Context()
	err = s.cfg.Engine.Cancel(ctx, j.ID, "cancelled by "+u.Name)
	if errors.Is(err, models.ErrConflict) {
		return nil, echo.NewHTTPError(http.StatusConflict, fmt.Sprintf("job %d has already ended", j.ID))
	}
	if err != nil {
		return nil, err
	}
	s.cfg.Logger.Info("job cancel requested", "job", j.ID, "by", u.Name)
	if u.Name != j.User {
		if err := s.audit(c, "job.cancel", fmt.Sprintf("job %d of %s", j.ID, j.User), ""); err != nil {
			return nil, err
		}
	}
	return s.cfg.Store.Job(ctx, j.ID)
}
