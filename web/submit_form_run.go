package web

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/templates"
)

// The submit form's run settings (environment, folder, time limit,
// retries, dependencies, array), the job page's account of them, and the
// array page.

// runForm reads the submit form's run settings.
func runForm(c echo.Context, f *templates.SubmitForm) {
	f.Env, f.Workdir, f.TimeLimit = c.FormValue("env"), strings.TrimSpace(c.FormValue("workdir")), c.FormValue("time_limit")
	f.Retries, f.Dependencies = c.FormValue("retries"), c.FormValue("dependencies")
	f.Array, f.ArrayParams = strings.TrimSpace(c.FormValue("array")), c.FormValue("array_params")
	f.Priority = strings.TrimSpace(c.FormValue("priority"))
}

// runRequest puts the form's run settings into req, noting what does not
// even parse.
func runRequest(f templates.SubmitForm, req *api.SubmitRequest, fe fieldErrors) {
	for i, line := range strings.Split(f.Env, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			fe["env"] = fmt.Sprintf("line %d: want NAME=VALUE", i+1)
			break
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		if len(req.Env) == job.MaxEnv {
			fe["env"] = fmt.Sprintf("more than %d variables", job.MaxEnv)
			break
		}
		if _, dup := req.Env[name]; dup {
			fe["env"] = fmt.Sprintf("line %d: %s is given twice", i+1, name)
			break
		}
		req.Env[name] = value
	}
	req.Workdir, req.TimeLimit = f.Workdir, strings.TrimSpace(f.TimeLimit)
	if v := strings.TrimSpace(f.Retries); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			fe["retries"] = "must be a whole number"
		}
		req.Retries = n
	}
	deps, err := job.ParseDependencies(f.Dependencies)
	if err != nil {
		fe["dependencies"] = err.Error()
	}
	req.Dependencies = deps
	req.Array, req.ArrayParams = f.Array, strings.TrimSpace(f.ArrayParams)
	if f.Priority != job.PriorityNormal {
		req.Priority = f.Priority
	}
}

// fillRunForm puts a submission's run settings into the submit form.
func fillRunForm(f *templates.SubmitForm, r api.SubmitRequest) {
	var env []string
	for k, v := range r.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	f.Env, f.Workdir, f.TimeLimit = strings.Join(env, "\n"), r.Workdir, r.TimeLimit
	if r.Retries > 0 {
		f.Retries = strconv.Itoa(r.Retries)
	}
	deps := make([]string, len(r.Dependencies))
	for i, d := range r.Dependencies {
		deps[i] = d.String()
	}
	f.Dependencies = strings.Join(deps, ",")
	f.Array, f.ArrayParams = r.Array, r.ArrayParams
	f.Priority = r.Priority
}

// describeRun fills in the job page's account of what j runs with.
func describeRun(aj api.Job, j *app.Job, d *templates.JobDetail) {
	d.Env, d.Workdir, d.Retries, d.Priority = slices.Clone(j.Env), j.Workdir, j.Retries, aj.Priority
	if aj.TimeLimitS != nil {
		d.TimeLimit = job.FormatTimeLimit(secs(*aj.TimeLimitS))
		if !j.State.Final() && aj.TimeLeftS != nil {
			d.TimeLeft = job.FormatTimeLimit(secs(*aj.TimeLeftS))
			if *aj.TimeLeftS <= 0 {
				d.TimeLeft = "none"
			}
		}
	}
	for _, dep := range aj.Dependencies {
		d.Dependencies = append(d.Dependencies, templates.DepLink{Kind: string(dep.Kind), JobID: dep.JobID})
	}
	if aj.Array != nil {
		d.ArrayID, d.ArrayIndex = aj.Array.ID, aj.Array.Index
	}
}

// depStates adds to the jobs d, job id's page, waits for their states
// (app.App.DependencyStates).
func (s *Server) depStates(c echo.Context, id int64, d *templates.JobDetail) error {
	if len(d.Dependencies) == 0 {
		return nil
	}
	states, arrays, err := s.app.DependencyStates(c.Request().Context(), appActor(c), id)
	if err != nil {
		return err
	}
	for i := range d.Dependencies {
		d.Dependencies[i].State = string(states[d.Dependencies[i].JobID])
		d.Dependencies[i].Array = arrays[d.Dependencies[i].JobID]
	}
	return nil
}

// groupArrays makes one row of the tasks of each array in rows (rows[i]
// shows js[i]), where its newest listed task was: the row leads to the
// array's page and counts its listed tasks by state.
func groupArrays(rows []templates.JobRow, js []app.Job) []templates.JobRow {
	type group struct {
		at     int
		states map[job.State]int
		n      int
	}
	groups := map[int64]*group{}
	out := make([]templates.JobRow, 0, len(rows))
	for i, j := range js {
		if j.ArrayID == 0 {
			out = append(out, rows[i])
			continue
		}
		g := groups[j.ArrayID]
		if g == nil {
			g = &group{at: len(out), states: map[job.State]int{}}
			groups[j.ArrayID] = g
			r := rows[i]
			r.ID, r.Array, r.Reason, r.ETA, r.ETAText, r.JCT, r.Borrowed = j.ArrayID, j.ArrayID, "", "", "", "—", false
			r.Name = arrayName(j)
			out = append(out, r)
		}
		g.n++
		g.states[j.State]++
	}
	for id, g := range groups {
		r := &out[g.at]
		r.State = string(arrayBadge(g.states))
		r.ArraySummary = fmt.Sprintf("array %d: %s", id, countStates(g.n, g.states))
	}
	return out
}

// arrayName is the name of the array task j belongs to: its own without
// the index.
func arrayName(j app.Job) string {
	return strings.TrimSuffix(j.Name, fmt.Sprintf("[%d]", j.ArrayIndex))
}

// arrayBadge is the state an array shows in the jobs list: running while any task runs,
// else waiting while any waits, else failed if any did not succeed.
func arrayBadge(states map[job.State]int) job.State {
	for _, st := range []job.State{job.Running, job.Queued, job.Preempted} {
		if states[st] > 0 {
			return st
		}
	}
	for _, st := range []job.State{job.Failed, job.TimedOut, job.Cancelled} {
		if states[st] > 0 {
			return st
		}
	}
	return job.Succeeded
}

// countStates says how many of n tasks are in each state: "6 tasks: 2
// running, 4 queued".
func countStates(n int, states map[job.State]int) string {
	var parts []string
	for _, st := range job.States {
		if states[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", states[st], st))
		}
	}
	return fmt.Sprintf("%d tasks: %s", n, strings.Join(parts, ", "))
}

// arrayDetail is array id's page for the current user.
func (s *Server) arrayDetail(c echo.Context) (templates.ArrayDetail, error) {
	id, err := jobIDParam(c)
	if err != nil {
		return templates.ArrayDetail{}, err
	}
	ctx := c.Request().Context()
	tasks, err := s.arrayFor(ctx, currentUser(c), id)
	if err != nil {
		return templates.ArrayDetail{}, err
	}
	m, err := s.app.ShownMoment(ctx, tasks...)
	if err != nil {
		return templates.ArrayDetail{}, err
	}
	a := s.arrayOf(m, tasks)
	d := templates.ArrayDetail{ID: a.ID, Name: a.Name, Team: a.Team, User: a.User, Limit: "no limit",
		Summary: countStates(len(tasks), a.States), CanCancel: canCancel(currentUser(c), &tasks[0]), Final: true}
	if a.Limit > 0 {
		d.Limit = fmt.Sprintf("at most %d tasks run at once", a.Limit)
	}
	varying := varyingEnv(tasks)
	for i, t := range a.Tasks {
		var params []string
		for _, kv := range tasks[i].Env {
			if name, _, _ := strings.Cut(kv, "="); varying[name] {
				params = append(params, kv)
			}
		}
		row := templates.ArrayTaskRow{ID: t.ID, Index: t.Array.Index, State: string(t.State), Started: fmtTime(t.StartedAt), Params: strings.Join(params, " "), Final: t.State.Final(),
			JCT: "—", ExitCode: "—", Reason: t.Reason}
		if t.JCTS != nil {
			row.JCT = fmtDuration(secs(*t.JCTS))
		}
		if t.ExitCode != nil {
			row.ExitCode = strconv.Itoa(*t.ExitCode)
		}
		d.Final = d.Final && t.State.Final()
		d.Tasks = append(d.Tasks, row)
	}
	return d, nil
}

func (s *Server) arrayPage(c echo.Context) error {
	d, err := s.arrayDetail(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.ArrayPage(page(c, fmt.Sprintf("Array %d", d.ID), "jobs"), d))
}

func (s *Server) arrayLive(c echo.Context) error {
	d, err := s.arrayDetail(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.ArrayLive(page(c, "", "jobs"), d))
}

func (s *Server) cancelArrayForm(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	if _, err := s.app.CancelArray(c.Request().Context(), appActor(c), id); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/arrays/%d", id))
}

// varyingEnv names the variables whose values differ between tasks: the
// columns of the array's parameter table.
func varyingEnv(tasks []app.Job) map[string]bool {
	values := map[string]map[string]bool{}
	for _, t := range tasks {
		for _, kv := range t.Env {
			name, value, _ := strings.Cut(kv, "=")
			if values[name] == nil {
				values[name] = map[string]bool{}
			}
			values[name][value] = true
		}
	}
	out := map[string]bool{}
	for name, vs := range values {
		if len(vs) > 1 {
			out[name] = true
		}
	}
	return out
}
