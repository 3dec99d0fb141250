package web

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/cmdline"
	"github.com/gpuportal/gpuportal/core/gpu"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/templates"
)

// render writes a templ component as the response.
func (s *Server) render(c echo.Context, status int, t templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return t.Render(c.Request().Context(), c.Response())
}

func page(c echo.Context, title, nav string) templates.Page {
	p := templates.Page{Title: title, Nav: nav, CSRF: csrfToken(c)}
	if outage, ok := c.Get(outageKey).(string); ok {
		p.Warning = outage // the database is out (dbstate.go)
	}
	if u := currentUser(c); u != nil {
		p.User = &templates.User{Name: u.Name, Role: string(u.Role), Team: u.Team}
	}
	return p
}

func (s *Server) loginView(c echo.Context, flash, name, next string) templ.Component {
	p := page(c, "Log in", "")
	p.Flash = flash
	o := templates.LoginOptions{Directory: s.ldap != nil}
	if s.oidc != nil {
		o.SSO = s.oidc.Name()
	}
	return templates.Login(p, name, next, o)
}

const timeLayout = "2006-01-02 15:04:05"

func fmtTime(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return t.Local().Format(timeLayout)
}

// fmtDuration writes d as a person reads it: 42s, 3m05s, 2h04m
// (app.FormatDuration).
func fmtDuration(d time.Duration) string { return app.FormatDuration(d) }

// jobRow is j as lists and pages show it, at now.
func jobRow(j api.Job, now time.Time) templates.JobRow {
	r := templates.JobRow{
		ID: j.ID, Name: j.Name, Team: j.Team, User: j.User, GPUs: j.GPUs, State: string(j.State),
		Submitted: fmtTime(&j.SubmittedAt), Started: fmtTime(j.StartedAt), Finished: fmtTime(j.FinishedAt),
		JCT: "—", Reason: j.Reason, Borrowed: j.Borrowed,
		ETA: j.Forecast.Short(now, time.Local), ETAText: j.Forecast.Text(now, time.Local),
	}
	switch {
	case j.Session != nil:
		r.Workload = sessionWorkload(j.Session.Type, j.Command)
	case len(j.Command) > 0:
		r.Workload = cmdline.Join(j.Command)
	case j.Sim != nil:
		r.Workload = "simulated, " + fmtDuration(secs(j.Sim.DurationS))
	}
	if j.JCTS != nil {
		r.JCT = fmtDuration(secs(*j.JCTS))
	}
	return r
}

func (s *Server) jobList(c echo.Context) (templates.JobList, error) {
	q, err := readJobListQuery(c, pageListLimit)
	if err != nil {
		return templates.JobList{}, err
	}
	admin := app.IsAdmin(currentUser(c))
	if q.Scope == "" {
		q.Scope = "team"
		if admin {
			q.Scope = "all"
		}
	}
	p, err := s.listJobs(c, q)
	if err != nil {
		return templates.JobList{}, err
	}
	ctx := c.Request().Context()
	m, err := s.app.ShownMoment(ctx, p.Jobs...)
	if err != nil {
		return templates.JobList{}, err
	}
	l := templates.JobList{Scope: q.Scope, State: q.State, Team: q.Team, User: q.User, Queue: q.Queue, Kind: q.Kind, Q: q.Q,
		Scopes: []string{"mine", "team"}, Kinds: app.JobKinds()}
	if q.limitAsked {
		l.Limit = strconv.Itoa(q.Limit)
	}
	if admin {
		l.Scopes = append(l.Scopes, "all")
		if l.Teams, err = s.app.ActorTeams(ctx, appActor(c)); err != nil {
			return templates.JobList{}, err
		}
	}
	for _, st := range job.States {
		l.States = append(l.States, string(st))
	}
	shown := make([]*app.Job, len(p.Jobs))
	for i := range p.Jobs {
		shown[i] = &p.Jobs[i]
	}
	idle, err := s.app.IdleStates(ctx, shown, m.Now)
	if err != nil {
		return templates.JobList{}, err
	}
	for i := range p.Jobs {
		r := jobRow(m.Job(&p.Jobs[i]), m.Now)
		if st := idle[p.Jobs[i].ID]; st != nil && st.Idle {
			r.Idle, r.IdleText = st.Short(m.Now), "idle "+st.Text(m.Now, time.Local)
		}
		l.Jobs = append(l.Jobs, r)
	}
	v := q.values()
	l.Query = v.Encode()
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	l.Self = v.Encode()
	if p.Next != "" {
		v.Set("cursor", p.Next)
		l.Older = "/jobs?" + v.Encode()
	}
	if p.Prev != "" {
		v.Set("cursor", p.Prev)
		l.Newer = "/jobs?" + v.Encode()
	}
	if q.Cursor != "" {
		l.First = "/jobs?" + l.Query
	}
	l.Jobs = groupArrays(l.Jobs, p.Jobs)
	return l, nil
}

func (s *Server) jobsPage(c echo.Context) error {
	l, err := s.jobList(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Jobs(page(c, "Jobs", "jobs"), l))
}

func (s *Server) jobRows(c echo.Context) error {
	l, err := s.jobList(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.JobRows(l.Jobs, l.Filtered()))
}

func (s *Server) submitPage(c echo.Context) error {
	teams, err := s.app.ActorTeams(c.Request().Context(), appActor(c))
	if err != nil {
		return err
	}
	u := currentUser(c)
	f := templates.SubmitForm{Team: u.Team, Teams: teams, GPUs: "1", Kind: "sim", DurationS: "120", Models: app.ModelNames()}
	if f.SessionTerms, err = s.app.SessionTerms(c.Request().Context(), appActor(c)); err != nil {
		return err
	}
	ts, err := s.userTemplates(c)
	if err != nil {
		return err
	}
	for _, t := range ts {
		f.Templates = append(f.Templates, templates.TemplateRow{ID: t.ID, Name: t.Name})
	}
	if v := c.QueryParam("template"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "template: must be a number")
		}
		tj, err := s.app.Template(c.Request().Context(), appActor(c), id)
		if err != nil {
			return err
		}
		fillForm(&f, tj.Job)
		f.FromTemplate = tj.Name
	}
	if v := c.QueryParam("from"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 1 {
			return echo.NewHTTPError(http.StatusBadRequest, "from: must be a job ID")
		}
		j, err := s.jobFor(c.Request().Context(), u, id)
		if err != nil {
			return err
		}
		fillForm(&f, app.RequestOf(j))
		f.FromJob = j.ID
		if j.User != u.Name {
			f.FromUser = j.User
		}
	}
	return s.render(c, http.StatusOK, templates.Submit(page(c, "Submit", "submit"), f))
}

// fillForm puts a saved submission into the submit form.
func fillForm(f *templates.SubmitForm, r api.SubmitRequest) {
	f.Name, f.Team, f.GPUs, f.Model = r.Name, r.Team, strconv.Itoa(r.GPUs), r.Model
	fillProfileForm(f, r.CPUProfile)
	fillRunForm(f, r)
	fillSharingForm(f, r)
	if r.GPUMemGB > 0 {
		f.GPUMemGB = strconv.FormatFloat(r.GPUMemGB, 'f', -1, 64)
	}
	if r.Session != nil {
		f.Kind, f.Command, f.SessionType, f.SessionPriority = "session", cmdline.Join(r.Command), r.Session.Type, r.Session.Priority
		if r.Session.Port > 0 {
			f.SessionPort = strconv.Itoa(r.Session.Port)
		}
	} else if len(r.Command) > 0 {
		f.Kind, f.Command, f.Image = "command", cmdline.Join(r.Command), r.Image
	} else if r.Sim != nil {
		f.Kind, f.DurationS = "sim", strconv.FormatFloat(r.Sim.DurationS, 'f', -1, 64)
	}
}

func (s *Server) submitForm(c echo.Context) error {
	f := templates.SubmitForm{
		Name: c.FormValue("name"), Team: c.FormValue("team"), GPUs: c.FormValue("gpus"),
		Kind: c.FormValue("kind"), Command: c.FormValue("command"),
		DurationS: c.FormValue("duration_s"), GPUMemGB: c.FormValue("gpu_mem_gb"),
		Model: c.FormValue("model"), Image: strings.TrimSpace(c.FormValue("image")),
		SessionType: c.FormValue("session_type"), SessionPort: c.FormValue("session_port"),
		SessionPriority: c.FormValue("session_priority") != "",
	}
	sharingForm(c, &f)
	profileForm(c, &f)
	runForm(c, &f)
	req, fe := formRequest(f)
	ctx, a := c.Request().Context(), appActor(c)
	var j *app.Job
	var err error
	if len(fe) == 0 {
		j, err = s.app.Submit(ctx, a, req)
	} else {
		err = s.app.CheckSubmit(ctx, a, req) // to mark every field at fault
	}
	more := fieldErrorsOf(err)
	if err != nil && more == nil {
		return err
	}
	for k, v := range more {
		if _, ok := fe[k]; !ok {
			fe[k] = v
		}
	}
	if len(fe) > 0 {
		teams, err := s.app.ActorTeams(ctx, a)
		if err != nil {
			return err
		}
		f.Teams, f.Errors, f.Models = teams, fe, app.ModelNames()
		if f.SessionTerms, err = s.app.SessionTerms(ctx, a); err != nil {
			return err
		}
		p := page(c, "Submit", "submit")
		p.Flash = "The job was not submitted: see the fields marked below."
		return s.render(c, http.StatusBadRequest, templates.Submit(p, f))
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/jobs/%d", j.ID))
}

// formRequest reads the submit form into a request, noting fields that are
// not even numbers.
func formRequest(f templates.SubmitForm) (api.SubmitRequest, fieldErrors) {
	fe := fieldErrors{}
	req := api.SubmitRequest{Name: f.Name, Team: f.Team, Model: f.Model}
	if n, err := strconv.Atoi(strings.TrimSpace(f.GPUs)); err == nil {
		req.GPUs = n
	} else {
		fe["gpus"] = "must be a whole number"
	}
	switch f.Kind {
	case "command", "session":
		argv, err := cmdline.Split(f.Command)
		if err != nil {
			fe["command"] = err.Error()
		}
		req.Command, req.Image = argv, f.Image
		if f.Kind == "session" {
			req.Session = &api.SessionRequest{Type: f.SessionType, Priority: f.SessionPriority}
			if v := strings.TrimSpace(f.SessionPort); v != "" {
				port, err := strconv.Atoi(v)
				if err != nil {
					fe["session.port"] = "must be a whole number"
				}
				req.Session.Port = port
			}
		}
	case "sim", "":
		d, err := strconv.ParseFloat(strings.TrimSpace(f.DurationS), 64)
		if err != nil {
			fe["sim.duration_s"] = "must be a number of seconds"
		}
		req.Sim = &api.SimSpec{DurationS: d}
	default:
		// It was submitted as a simulated job.
		fe["kind"] = fmt.Sprintf("%q: want command, sim or session", f.Kind)
	}
	if v := strings.TrimSpace(f.GPUMemGB); v != "" {
		m, err := strconv.ParseFloat(v, 64)
		if err != nil {
			fe["gpu_mem_gb"] = "must be a number"
		}
		req.GPUMemGB = m
	}
	sharingRequest(f, &req, fe)
	profileRequest(f, &req, fe)
	runRequest(f, &req, fe)
	return req, fe
}

// resubmitWay is how u may run j again from its page: its owner edits a
// form filled from it; its team's lead or an admin resubmits it as its
// owner's (resubmitJob); a teammate not at all.
func resubmitWay(u *app.User, j *app.Job) string {
	switch {
	case u.Name == j.User:
		return templates.ResubmitEdit
	case canCancel(u, j):
		return templates.ResubmitAsOwner
	}
	return ""
}

func (s *Server) jobDetail(c echo.Context) (templates.JobDetail, error) {
	j, err := s.loadJob(c)
	if err != nil {
		return templates.JobDetail{}, err
	}
	m, err := s.app.ShownMoment(c.Request().Context(), *j)
	if err != nil {
		return templates.JobDetail{}, err
	}
	aj := s.app.JobOf(m, j)
	d := templates.JobDetail{
		JobRow:      jobRow(aj, m.Now),
		Placement:   strings.Join(aj.Placement, ", "),
		Executed:    fmtDuration(secs(aj.ExecutedS)),
		Attained:    fmt.Sprintf("%.0f GPU-seconds", aj.AttainedService),
		Preemptions: j.Preemptions,
		HasRun:      j.StartedAt != nil,
		Queue:       j.QueueIndex,
		Model:       j.Model,
		Image:       j.Image,
		CanCancel:   canCancel(currentUser(c), j),
		Resubmit:    resubmitWay(currentUser(c), j),
		Final:       j.State.Final(),
		Log:         s.jobLog(j.ID, gpu.PlacementNodes(j.Placement)),
		LogMachines: logMachines(j.Placement),
		Session:     s.sessionView(currentUser(c), j),
	}
	if d.Placement == "" {
		d.Placement = "—"
	}
	if err := s.describeForecast(c, aj, m.Now, &d); err != nil {
		return d, err
	}
	h, err := s.app.JobHistory(c.Request().Context(), appActor(c), j.ID)
	if err != nil {
		return d, err
	}
	for _, e := range h {
		d.History = append(d.History, templates.Event{At: e.At.Local().Format(timeLayout), State: string(e.State), Detail: e.Detail})
	}
	if j.ExitCode != nil {
		d.ExitCode = strconv.Itoa(*j.ExitCode)
	}
	describeSharing(aj, &d)
	if aj.ReclaimableAt != nil {
		d.Reclaimable = reclaimableText(*aj.ReclaimableAt, m.Now)
	}
	d.DeclaredProfile = describeDeclaredProfile(j)
	describeRun(aj, j, &d)
	if err := s.depStates(c, j.ID, &d); err != nil {
		return d, err
	}
	describeResources(aj.Resources, &d)
	d.LiveMemory = s.placementLiveMemory(j.Placement)
	u, err := s.app.JobUsage(c.Request().Context(), j, m.Now, true)
	if err != nil {
		return d, err
	}
	describeUsage(u, m.Now, &d)
	if d.CanCancel && j.State == job.Running && s.app.Reclaims() {
		if p := s.app.IdleTermsOf(c.Request().Context(), j.Team).Policy; p.Reclaims(j.IsSession()) {
			d.KeepAliveMaxH = p.MaxKeepAlive.Hours()
		}
	}
	return d, nil
}

// reclaimableText says when a borrowed job's GPUs may be taken back
// (api.Job.ReclaimableAt), as of now.
func reclaimableText(at, now time.Time) string {
	if at.After(now) {
		return fmt.Sprintf("on GPUs other teams lent: a team under its guarantee may take them back from %s (in %s)",
			fmtTime(&at), fmtDuration(at.Sub(now)))
	}
	return "on GPUs other teams lent: a team under its guarantee may take them back now, whenever one of its jobs needs them"
}

// logTail is how much of a job's output its page shows.
const logTail = 16 << 10

// jobLog is the end of job id's output for its page: on the first of
// machines (the job's) that has it (openJobLogOn).
func (s *Server) jobLog(id int64, machines []string) string {
	f, err := s.openJobLogOn(id, "", machines)
	if errors.Is(err, os.ErrNotExist) {
		return "(no output yet)"
	}
	if err != nil {
		s.cfg.Logger.Warn("read job log", "job", id, "err", err)
		return "(output unavailable)"
	}
	defer f.Close()
	b, err := readTail(f, logTail)
	if err != nil {
		s.cfg.Logger.Warn("read job log", "job", id, "err", err)
		return "(output unavailable)"
	}
	return string(b)
}

// logMachines are the machines of a job on several, whose output the
// page offers each; nil for a job on one (its output is the one shown).
func logMachines(placement []string) []string {
	if m := gpu.PlacementNodes(placement); len(m) > 1 {
		return m
	}
	return nil
}

func readTail(f *os.File, n int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(0, st.Size()-n)
	b := make([]byte, st.Size()-off)
	_, err = f.ReadAt(b, off)
	return b, err
}

func (s *Server) jobPage(c echo.Context) error {
	d, err := s.jobDetail(c)
	if err != nil {
		return err
	}
	p := page(c, d.Name, "jobs")
	p.Charts, p.StoredCharts = true, !s.leading()
	return s.render(c, http.StatusOK, templates.JobPage(p, d))
}

func (s *Server) jobLive(c echo.Context) error {
	d, err := s.jobDetail(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.JobLive(page(c, d.Name, "jobs"), d))
}

func (s *Server) cancelForm(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	j, err := s.app.Cancel(c.Request().Context(), appActor(c), id)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/jobs/%d", j.ID))
}

// describeForecast fills in when a waiting job should start and how good
// such forecasts have been.
func (s *Server) describeForecast(c echo.Context, aj api.Job, now time.Time, d *templates.JobDetail) error {
	if aj.Forecast == nil {
		return nil
	}
	d.Estimate = aj.Forecast.Text(now, time.Local)
	st, err := s.forecastStats(c.Request().Context())
	if err != nil {
		return err
	}
	d.EstimateNote = calibrationText(st) + " " + forecastMethod
	return nil
}
