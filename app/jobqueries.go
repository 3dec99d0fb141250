package app

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// The reads of jobs: one job, a page of the jobs list, its history, the
// figures around them (moment.go), each within what the actor may see.

// JobReadStore is what the reads of jobs, queues and forecasts read of
// the store; *models.Store is one.
type JobReadStore interface {
	RunningJobs(ctx context.Context) ([]models.Job, error)
	QueueRows(ctx context.Context) ([]models.QueueRow, error)
	LatestForecasts(ctx context.Context) (map[int64]models.Forecast, error)
	LatestForecastsOf(ctx context.Context, ids []int64) (map[int64]models.Forecast, error)
	JobsByID(ctx context.Context, ids []int64) ([]models.Job, error)
	// QueueJobsByID is JobsByID with the fields a queue's entry shows.
	QueueJobsByID(ctx context.Context, ids []int64) ([]models.Job, error)
	JCTsSince(ctx context.Context, since time.Time, limit int) ([]float64, error)
	ForecastOutcomes(ctx context.Context, kind string, limit int) ([]models.ForecastOutcome, error)
	ListJobs(ctx context.Context, f models.JobFilter) ([]models.Job, error)
	JobEvents(ctx context.Context, jobID int64) ([]models.JobEvent, error)
	JobStatesAndArrays(ctx context.Context, ids []int64) (map[int64]models.JobState, map[int64]bool, error)
	WhatIfStore
	GPUHistoryStore
}

// Bounds of a jobs list request.
const (
	MaxListLimit   = 1000
	maxListQuery   = 200
	maxListNameLen = 64
)

// JobKinds are the kinds of job a jobs list can keep (JobListRequest.Kind).
func JobKinds() []string { return []string{models.KindCommand, models.KindSim} }

// JobListRequest asks for a page of the jobs list, as a user writes it
// (?scope=&state=&team=&user=&queue=&kind=&q=&cursor=&limit=): Scope
// is "mine", "team" ("": the user's team, or every job for an admin) or
// "all" (admins); State a comma-separated list of states; Cursor one of
// a JobPage's.
type JobListRequest struct {
	Scope, State, Team, User, Queue, Kind, Q string
	Limit                                    int
	Cursor                                   string
}

// JobPage is one page of a jobs list, newest first, and the cursors of
// the pages around it: Next of the older one, Prev of the newer one; ""
// where there is none.
type JobPage struct {
	Jobs       []Job
	Next, Prev string
}

// ListJobs reads the page of the jobs list req asks for, within what a
// may see: a researcher or a lead lists their team's jobs (their own
// with scope mine), an admin any team's.
func (s *App) ListJobs(ctx context.Context, a Actor, req JobListRequest) (JobPage, error) {
	f, err := jobListFilter(a.User, req)
	if err != nil {
		return JobPage{}, err
	}
	if req.Limit < 1 || req.Limit > MaxListLimit {
		return JobPage{}, invalid("limit", "limit: must be a number from 1 to %d", MaxListLimit)
	}
	p, err := s.listJobPage(ctx, f, req.Limit)
	return p, stored(err)
}

// jobListFilter turns req into a store filter within what u may see.
func jobListFilter(u *User, req JobListRequest) (models.JobFilter, error) {
	var f models.JobFilter
	switch req.Scope {
	case "mine":
		f.User = u.Name
	case "", "team":
		if u.Role != RoleAdmin || req.Scope == "team" {
			f.Team = u.Team
		}
	case "all":
		if u.Role != RoleAdmin {
			return f, forbidden("scope: only admins may list all jobs")
		}
	default:
		return f, invalid("scope", "scope: must be mine, team or all")
	}
	for _, name := range strings.Split(req.State, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		st := job.State(name)
		if !st.Valid() {
			return f, invalid("state", "state: unknown state %q (want %s)", name, stateNames())
		}
		f.States = append(f.States, st)
	}
	if req.Team != "" {
		if len(req.Team) > maxListNameLen {
			return f, invalid("team", "team: at most %d characters", maxListNameLen)
		}
		if f.Team != "" && f.Team != req.Team {
			return f, forbidden("team: you may list only your own team's jobs")
		}
		f.Team = req.Team
	}
	if req.User != "" {
		if len(req.User) > maxListNameLen {
			return f, invalid("user", "user: at most %d characters", maxListNameLen)
		}
		if f.User != "" && f.User != req.User {
			return f, invalid("user", "user: scope mine lists only your own jobs")
		}
		f.User = req.User
	}
	if req.Queue != "" {
		n, err := strconv.Atoi(req.Queue)
		if err != nil || n < 0 || n > 1000 {
			return f, invalid("queue", "queue: must be a queue number from 0")
		}
		f.Queue = &n
	}
	switch req.Kind {
	case "", models.KindCommand, models.KindSim:
		f.Kind = req.Kind
	default:
		return f, invalid("kind", "kind: must be %s or %s", models.KindCommand, models.KindSim)
	}
	if utf8.RuneCountInString(req.Q) > maxListQuery {
		return f, invalid("q", "q: at most %d characters", maxListQuery)
	}
	f.Query = req.Q
	if req.Cursor != "" {
		dir, id, err := parseJobCursor(req.Cursor)
		if err != nil {
			return f, err
		}
		if dir == 'a' {
			f.After = id
		} else {
			f.Before = id
		}
	}
	return f, nil
}

func stateNames() string {
	names := make([]string, len(job.States))
	for i, st := range job.States {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// JobCursor names a place in the jobs list: the jobs before (older
// than, dir 'b') an ID or after (newer than, dir 'a') it. It is opaque to
// clients.
func JobCursor(dir byte, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%c%d", dir, id)))
}

func parseJobCursor(s string) (byte, int64, error) {
	bad := invalid("cursor", "cursor: not a cursor this server gave (start again without it)")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2 || (b[0] != 'a' && b[0] != 'b') {
		return 0, 0, bad
	}
	id, err := strconv.ParseInt(string(b[1:]), 10, 64)
	if err != nil || id < 1 {
		return 0, 0, bad
	}
	return b[0], id, nil
}

// listJobPage reads one page of f, limit jobs at most, with the cursors
// of the pages around it.
func (s *App) listJobPage(ctx context.Context, f models.JobFilter, limit int) (JobPage, error) {
	f.Limit = limit + 1 // one more tells whether there is a page beyond
	js, err := s.cfg.Store.ListJobs(ctx, f)
	if err != nil {
		return JobPage{}, err
	}
	var p JobPage
	beyond := len(js) > limit
	if f.After > 0 && !beyond {
		// Back at the newest jobs: the first page, full.
		f.After = 0
		if js, err = s.cfg.Store.ListJobs(ctx, f); err != nil {
			return JobPage{}, err
		}
		beyond = len(js) > limit
	}
	if f.After > 0 {
		js = js[1:] // newest first: the extra one is the newest
		p.Prev = JobCursor('a', js[0].ID)
		p.Next = JobCursor('b', js[len(js)-1].ID)
		p.Jobs = jobViews(js)
		return p, nil
	}
	if beyond {
		js = js[:limit]
		p.Next = JobCursor('b', js[len(js)-1].ID)
	}
	p.Jobs = jobViews(js)
	if f.Before > 0 && len(js) > 0 {
		g := f
		g.Before, g.After, g.Limit = 0, js[0].ID, 1
		newer, err := s.cfg.Store.ListJobs(ctx, g)
		if err != nil {
			return JobPage{}, err
		}
		if len(newer) > 0 {
			p.Prev = JobCursor('a', js[0].ID)
		}
	}
	return p, nil
}

// JobHistory returns each state job id entered, when and why, if a may
// see it.
func (s *App) JobHistory(ctx context.Context, a Actor, id int64) ([]api.Event, error) {
	if _, err := s.job(ctx, a, id); err != nil {
		return nil, err
	}
	es, err := s.cfg.Store.JobEvents(ctx, id)
	if err != nil {
		return nil, stored(err)
	}
	out := make([]api.Event, len(es))
	for i, e := range es {
		out[i] = api.Event{At: e.At, State: e.State, Detail: e.Detail}
	}
	return out, nil
}

// DependencyStates returns the states of the jobs job id waits for, as
// the engine judges them (an array's ID stands for all its tasks), and
// which of them are arrays, if a may see job id.
func (s *App) DependencyStates(ctx context.Context, a Actor, id int64) (map[int64]job.State, map[int64]bool, error) {
	j, err := s.job(ctx, a, id)
	if err != nil {
		return nil, nil, err
	}
	deps := j.Deps()
	ids := make([]int64, len(deps))
	for i, d := range deps {
		ids[i] = d.JobID
	}
	states, arrays, err := s.cfg.Store.JobStatesAndArrays(ctx, ids)
	return states, arrays, stored(err)
}

// ActorTeams are the teams a may submit jobs to and list the jobs of:
// every team for an admin, else a's own.
func (s *App) ActorTeams(ctx context.Context, a Actor) ([]string, error) {
	if a.User.Role != RoleAdmin {
		return []string{a.User.Team}, nil
	}
	return s.teamNames(ctx)
}

// ClusterGPUs is the number of GPUs connected now.
func (s *App) ClusterGPUs() int { return s.clusterGPUs() }
