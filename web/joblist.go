package web

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/app"
)

// The jobs list, paged by a cursor (keyset pagination on the job ID) and
// filtered: one parser and one query for the API, the Jobs page and the
// CLI that reads the API.

// Bounds of a jobs list request.
const (
	maxListLimit  = app.MaxListLimit
	pageListLimit = 50 // the Jobs page's default
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
	app.JobListRequest
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

// jobListParams are the query parameters of GET /api/v1/jobs.
var jobListParams = []string{"scope", "state", "user", "team", "queue", "kind", "q", "limit", "cursor"}

// onlyParams refuses, naming it, a parameter of q not in names (a typo:
// ?stat=failed would list every job) or one given more than once.
func onlyParams(q url.Values, names []string) error {
	for name, vs := range q {
		if !slices.Contains(names, name) {
			if len(name) > 64 {
				name = name[:61] + "..."
			}
			return badRequest("%s: not a parameter of this request (want %s)", name, strings.Join(names, ", "))
		}
		if len(vs) > 1 {
			return badRequest("%s: given %d times: give it once", name, len(vs))
		}
	}
	return nil
}

// readJobListQuery reads a jobs list request; defaultLimit applies when
// ?limit= is absent.
func readJobListQuery(c echo.Context, defaultLimit int) (jobListQuery, error) {
	q := jobListQuery{JobListRequest: app.JobListRequest{
		Scope: c.QueryParam("scope"), State: c.QueryParam("state"), Team: strings.TrimSpace(c.QueryParam("team")),
		User: strings.TrimSpace(c.QueryParam("user")), Queue: strings.TrimSpace(c.QueryParam("queue")),
		Kind: c.QueryParam("kind"), Q: strings.TrimSpace(c.QueryParam("q")), Cursor: c.QueryParam("cursor"),
		Limit: defaultLimit,
	}}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxListLimit {
			return q, badRequest("limit: must be a number from 1 to %d", maxListLimit)
		}
		q.Limit, q.limitAsked = n, true
	}
	return q, nil
}

// listJobs reads the page of the jobs list q asks for, within what the
// user may see (app.App.ListJobs).
func (s *Server) listJobs(c echo.Context, q jobListQuery) (app.JobPage, error) {
	return s.app.ListJobs(c.Request().Context(), appActor(c), q.JobListRequest)
}

// setPageHeaders tells an API client the cursors around a page.
func setPageHeaders(c echo.Context, q jobListQuery, p app.JobPage) {
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
