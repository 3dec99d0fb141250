package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/api"
)

// IdempotencyKey is a fresh key for a submission (the Idempotency-Key
// header): its retries store one job.
func IdempotencyKey() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("idempotency key: %w", err)
	}
	return "cli-" + hex.EncodeToString(b), nil
}

// Submit submits a job under an Idempotency-Key of its own (or the one
// RequestHeader gives) and sends it again while the server cannot be
// reached or answers that it cannot serve now (Retriable), pausing as
// WithRetryPauses says: a retry gets back the job an earlier attempt
// stored, whose answer was lost, never a second one.
func (c *Client) Submit(ctx context.Context, req api.SubmitRequest, opts ...CallOption) (api.Job, error) {
	key, err := IdempotencyKey()
	if err != nil {
		return api.Job{}, err
	}
	opts = append([]CallOption{RequestHeader("Idempotency-Key", key)}, opts...)
	for attempt := 0; ; attempt++ {
		var j api.Job
		err := c.call(ctx, http.MethodPost, "/api/v1/jobs", nil, req, &j, opts...)
		if err == nil || attempt == len(c.retries) || !Retriable(err) {
			return j, err
		}
		if sleep(ctx, c.retries[attempt]) != nil {
			return api.Job{}, err
		}
	}
}

// Job is job id as its owner sees it now.
func (c *Client) Job(ctx context.Context, id int64, opts ...CallOption) (api.Job, error) {
	var j api.Job
	err := c.getJSON(ctx, jobPath(id), nil, &j, opts...)
	return j, err
}

// Cancel cancels job id and returns it: ended (cancelled), or still
// stopping.
func (c *Client) Cancel(ctx context.Context, id int64, opts ...CallOption) (api.Job, error) {
	var j api.Job
	err := c.call(ctx, http.MethodDelete, jobPath(id), nil, nil, &j, opts...)
	return j, err
}

// Resubmit submits job id again with the same fields, as a new job of
// its owner's, and returns the new job.
func (c *Client) Resubmit(ctx context.Context, id int64, opts ...CallOption) (api.Job, error) {
	var j api.Job
	err := c.call(ctx, http.MethodPost, jobPath(id)+"/resubmit", nil, nil, &j, opts...)
	return j, err
}

// KeepAlive keeps job id (a session) from being ended as idle for hours.
func (c *Client) KeepAlive(ctx context.Context, id int64, hours float64, opts ...CallOption) (api.Job, error) {
	var j api.Job
	err := c.call(ctx, http.MethodPost, jobPath(id)+"/keep-alive", nil, api.KeepAliveRequest{Hours: hours}, &j, opts...)
	return j, err
}

// History is job id's events, oldest first.
func (c *Client) History(ctx context.Context, id int64, opts ...CallOption) ([]api.Event, error) {
	var h []api.Event
	err := c.getJSON(ctx, jobPath(id)+"/history", nil, &h, opts...)
	return h, err
}

// Array is the array whose first task is job id, with its tasks.
func (c *Client) Array(ctx context.Context, id int64, opts ...CallOption) (api.Array, error) {
	var a api.Array
	err := c.getJSON(ctx, fmt.Sprintf("/api/v1/arrays/%d", id), nil, &a, opts...)
	return a, err
}

// CancelArray cancels every unfinished task of array id.
func (c *Client) CancelArray(ctx context.Context, id int64, opts ...CallOption) (api.Array, error) {
	var a api.Array
	err := c.call(ctx, http.MethodDelete, fmt.Sprintf("/api/v1/arrays/%d", id), nil, nil, &a, opts...)
	return a, err
}

func jobPath(id int64) string { return "/api/v1/jobs/" + strconv.FormatInt(id, 10) }

// JobQuery filters the jobs list (GET /api/v1/jobs); the zero value asks
// for the server's default: the caller's team's jobs (every job for
// admins), newest first.
type JobQuery struct {
	// Scope is mine, team or all.
	Scope string
	// States are the states to keep; none: all.
	States []string
	User   string
	Team   string
	// Queue keeps the jobs of one priority queue; nil: all.
	Queue *int
	// Kind is batch or session; empty: both.
	Kind string
	// Text keeps jobs whose name, user or command holds it (q).
	Text string
	// Limit is the page's size (1 to 1000; 0: the server's default).
	Limit int
	// Cursor is where a page begins: the Next of the page before.
	Cursor string
}

func (q JobQuery) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("scope", q.Scope)
	set("state", strings.Join(q.States, ","))
	set("user", q.User)
	set("team", q.Team)
	set("kind", q.Kind)
	set("q", q.Text)
	set("cursor", q.Cursor)
	if q.Queue != nil {
		v.Set("queue", strconv.Itoa(*q.Queue))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// JobPage is one page of the jobs list.
type JobPage struct {
	Jobs []api.Job
	// Next is the cursor of the next page; empty on the last.
	Next string
}

// Jobs is one page of the jobs list q asks for.
func (c *Client) Jobs(ctx context.Context, q JobQuery, opts ...CallOption) (JobPage, error) {
	var h http.Header
	var p JobPage
	if err := c.getJSON(ctx, "/api/v1/jobs", q.values(), &p.Jobs, append(opts, Header(&h))...); err != nil {
		return JobPage{}, err
	}
	p.Next = h.Get("X-Next-Cursor")
	return p, nil
}

// AllJobs is every job q asks for, following the server's cursor page
// after page (q.Limit is the size of each page).
func (c *Client) AllJobs(ctx context.Context, q JobQuery) ([]api.Job, error) {
	jobs := []api.Job{}
	for {
		p, err := c.Jobs(ctx, q)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, p.Jobs...)
		if p.Next == "" || len(p.Jobs) == 0 {
			return jobs, nil
		}
		q.Cursor = p.Next
	}
}
