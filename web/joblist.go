package web

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// The jobs list, paged by a cursor (keyset pagination on the job ID) and
// filtered: one parser and one query for the API, the Jobs page and the
// CLI that reads the API.

// Bounds of a jobs list request.
const (
	maxListLimit   = 1000
	pageListLimit  = 50 // the Jobs page's default
	maxListQuery   = 200
	maxListNameLen = 64
)

// Response headers that carry a list's cursors (the body stays a list of
// jobs): the cursor of the next (older) page and of the previous (newer)
// one; absent where there is none. Link carries the same as URLs.
const (
	headerNextCursor = "X-Next-Cursor"
	headerPrevCursor = "X-Prev-Cursor"
)

// jobListQuery is a jobs list request as the user wrote it, to be echoed
// in forms and pager links.
type jobListQuery struct {
	Scope, State, Team, User, Queue, Kind, Q string
	Limit                                    int
	Cursor                                   string
	// limitAsked: ?limit= was given (else Limit is the default).
	limitAsked bool
}

// values is q as URL query parameters, without the cursor; empty fields
// are left out.
func (q jobListQuery) values() url.Values {
	v := url.Values{}
	for _, kv := range [][2]string{{"scope", q.Scope}, {"state", q.State}, {"team", q.Team}, {"user", q.User},
		{"queue", q.Queue}, {"kind", q.Kind}, {"q", q.Q}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	if q.limitAsked {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// jobPage is one page of a jobs list and the cursors around it.
type jobPage struct {
	Jobs       []models.Job
	Next, Prev string // cursors; "" where there is no such page
}

// readJobListQuery reads a jobs list request; defaultLimit applies when
// ?limit= is absent.
func readJobListQuery(c echo.Context, defaultLimit int) (jobListQuery, error) {
	q := jobListQuery{
		Scope: c.QueryParam("scope"), State: c.QueryParam("state"), Team: strings.TrimSpace(c.QueryParam("team")),
		User: strings.TrimSpace(c.QueryParam("user")), Queue: strings.TrimSpace(c.QueryParam("queue")),
		Kind: c.QueryParam("kind"), Q: strings.TrimSpace(c.QueryParam("q")), Cursor: c.QueryParam("cursor"),
		Limit: defaultLimit,
	}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			return q, badRequest("limit: must be a number from 1 to %d", maxListLimit)
		}
		q.Limit, q.limitAsked = n, true
	}
	return q, nil
}

// jobListFilter turns q into a store filter within what the user may see.
func (s *Server) jobListFilter(c echo.Context, q jobListQuery) (models.JobFilter, error) {
	f, err := s.jobFilter(c, q.Scope, "")
	if err != nil {
		return f, err
	}
	for _, name := range strings.Split(q.State, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		st := job.State(name)
		if !st.Valid() {
			return f, badRequest("state: unknown state %q (want %s)", name, stateNames())
		}
		f.States = append(f.States, st)
	}
	if q.Team != "" {
		if len(q.Team) > maxListNameLen {
			return f, badRequest("team: at most %d characters", maxListNameLen)
		}
		if f.Team != "" && f.Team != q.Team {
			return f, echo.NewHTTPError(http.StatusForbidden, "team: you may list only your own team's jobs")
		}
		f.Team = q.Team
	}
	if q.User != "" {
		if len(q.User) > maxListNameLen {
			return f, badRequest("user: at most %d characters", maxListNameLen)
		}
		if f.User != "" && f.User != q.User {
			return f, badRequest("user: scope mine lists only your own jobs")
		}
		f.User = q.User
	}
	if q.Queue != "" {
		n, err := strconv.Atoi(q.Queue)
		if err != nil || n < 0 || n > 1000 {
			return f, badRequest("queue: must be a queue number from 0")
		}
		f.Queue = &n
	}
	switch q.Kind {
	case "", models.KindCommand, models.KindSim:
		f.Kind = q.Kind
	default:
		return f, badRequest("kind: must be %s or %s", models.KindCommand, models.KindSim)
	}
	if utf8.RuneCountInString(q.Q) > maxListQuery {
		return f, badRequest("q: at most %d characters", maxListQuery)
	}
	f.Query = q.Q
	if q.Cursor != "" {
		dir, id, err := parseCursor(q.Cursor)
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

// A cursor names a place in the list: the jobs before (older than) an ID
// or after (newer than) it. It is opaque to clients.
func makeCursor(dir byte, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%c%d", dir, id)))
}

func parseCursor(s string) (byte, int64, error) {
	bad := badRequest("cursor: not a cursor this server gave (start again without it)")
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
func (s *Server) listJobPage(c echo.Context, f models.JobFilter, limit int) (jobPage, error) {
	ctx := c.Request().Context()
	f.Limit = limit + 1 // one more tells whether there is a page beyond
	js, err := s.cfg.Store.ListJobs(ctx, f)
	if err != nil {
		return jobPage{}, err
	}
	var p jobPage
	beyond := len(js) > limit
	if f.After > 0 && !beyond {
		// Back at the newest jobs: the first page, full.
		f.After = 0
		if js, err = s.cfg.Store.ListJobs(ctx, f); err != nil {
			return jobPage{}, err
		}
		beyond = len(js) > limit
	}
	if f.After > 0 {
		js = js[1:] // newest first: the extra one is the newest
		p.Prev = makeCursor('a', js[0].ID)
		p.Next = makeCursor('b', js[len(js)-1].ID)
		p.Jobs = js
		return p, nil
	}
	if beyond {
		js = js[:limit]
		p.Next = makeCursor('b', js[len(js)-1].ID)
	}
	p.Jobs = js
	if f.Before > 0 && len(js) > 0 {
		g := f
		g.Before, g.After, g.Limit = 0, js[0].ID, 1
		newer, err := s.cfg.Store.ListJobs(ctx, g)
		if err != nil {
			return jobPage{}, err
		}
		if len(newer) > 0 {
			p.Prev = makeCursor('a', js[0].ID)
		}
	}
	return p, nil
}

// setPageHeaders tells an API client the cursors around a page.
func setPageHeaders(c echo.Context, q jobListQuery, p jobPage) {
	h := c.Response().Header()
	var links []string
	link := func(cursor, rel string) {
		v := q.values()
		v.Set("cursor", cursor)
		links = append(links, fmt.Sprintf("<%s?%s>; rel=%q", c.Request().URL.Path, v.Encode(), rel))
	}
	if p.Next != "" {
		h.Set(headerNextCursor, p.Next)
		link(p.Next, "next")
	}
	if p.Prev != "" {
		h.Set(headerPrevCursor, p.Prev)
		link(p.Prev, "prev")
	}
	if len(links) > 0 {
		h.Set("Link", strings.Join(links, ", "))
	}
}
