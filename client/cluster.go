package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gpuportal/gpuportal/api"
)

// Version is the server's build; it needs no token.
func (c *Client) Version(ctx context.Context, opts ...CallOption) (api.Version, error) {
	var v api.Version
	err := c.getJSON(ctx, "/api/v1/version", nil, &v, opts...)
	return v, err
}

// Me is the account the token acts as.
func (c *Client) Me(ctx context.Context, opts ...CallOption) (api.Me, error) {
	var m api.Me
	err := c.getJSON(ctx, "/api/v1/me", nil, &m, opts...)
	return m, err
}

// CreateToken signs in as user with password (HTTP basic
// authentication) and returns a new API token of theirs.
func (c *Client) CreateToken(ctx context.Context, user, password string) (api.Token, error) {
	var t api.Token
	err := c.call(ctx, http.MethodPost, "/api/v1/tokens", nil, nil, &t, basicAuth(user, password))
	if err == nil && t.Token == "" {
		err = errors.New("POST /api/v1/tokens: the server's answer holds no token")
	}
	return t, err
}

func basicAuth(user, password string) CallOption {
	return func(c *call) {
		r := http.Request{Header: http.Header{}}
		r.SetBasicAuth(user, password)
		RequestHeader("Authorization", r.Header.Get("Authorization"))(c)
	}
}

// RevokeToken revokes the token the client presents.
func (c *Client) RevokeToken(ctx context.Context) error {
	_, err := c.Do(ctx, http.MethodDelete, "/api/v1/tokens/current", nil, nil)
	return err
}

// QueueQuery asks for a page of the queues' jobs; the zero value asks
// for every queue with all its jobs.
type QueueQuery struct {
	// Queue is the one queue to show; nil: all.
	Queue *int
	// Offset and Limit (1 to 1000) bound the jobs shown of each queue.
	Offset, Limit int
}

// Queues is the scheduler's view: its policy and priority queues.
func (c *Client) Queues(ctx context.Context, q QueueQuery, opts ...CallOption) (api.Queues, error) {
	v := url.Values{}
	if q.Queue != nil {
		v.Set("queue", strconv.Itoa(*q.Queue))
	}
	if q.Offset != 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out api.Queues
	err := c.getJSON(ctx, "/api/v1/queues", v, &out, opts...)
	return out, err
}

// Nodes is the connected machines with their GPUs and jobs.
func (c *Client) Nodes(ctx context.Context, opts ...CallOption) ([]api.Node, error) {
	var out []api.Node
	err := c.getJSON(ctx, "/api/v1/nodes", nil, &out, opts...)
	return out, err
}

// Teams is where every team stands under fair share.
func (c *Client) Teams(ctx context.Context, opts ...CallOption) ([]api.TeamShare, error) {
	var out []api.TeamShare
	err := c.getJSON(ctx, "/api/v1/teams", nil, &out, opts...)
	return out, err
}

// Team is one team with its members and recent use.
func (c *Client) Team(ctx context.Context, name string, opts ...CallOption) (api.Team, error) {
	var out api.Team
	err := c.getJSON(ctx, "/api/v1/teams/"+url.PathEscape(name), nil, &out, opts...)
	return out, err
}

// Notifications is the caller's notification settings and recent
// notifications.
func (c *Client) Notifications(ctx context.Context, opts ...CallOption) (api.NotificationSettings, error) {
	var out api.NotificationSettings
	err := c.getJSON(ctx, "/api/v1/me/notifications", nil, &out, opts...)
	return out, err
}

// SetNotifications changes the caller's notification settings.
func (c *Client) SetNotifications(ctx context.Context, upd api.NotificationSettingsUpdate, opts ...CallOption) (api.NotificationSettings, error) {
	var out api.NotificationSettings
	err := c.call(ctx, http.MethodPut, "/api/v1/me/notifications", nil, upd, &out, opts...)
	return out, err
}

// TestNotification queues a test notification on each of the caller's
// channels.
func (c *Client) TestNotification(ctx context.Context, opts ...CallOption) (api.NotificationTest, error) {
	var out api.NotificationTest
	err := c.call(ctx, http.MethodPost, "/api/v1/me/notifications/test", nil, nil, &out, opts...)
	return out, err
}

// AccountingQuery asks for GPU-hours over a range of days.
type AccountingQuery struct {
	// From and To are the first and last days (YYYY-MM-DD, UTC).
	From, To string
	// By is team or user; Period day, month or range.
	By, Period string
	Team, User string
}

func (q AccountingQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"from": q.From, "to": q.To, "by": q.By, "period": q.Period, "team": q.Team, "user": q.User} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Accounting is the GPU-hours allocated, used and idle that q asks for.
func (c *Client) Accounting(ctx context.Context, q AccountingQuery, opts ...CallOption) (api.Accounting, error) {
	var out api.Accounting
	err := c.getJSON(ctx, "/api/v1/accounting", q.values(), &out, opts...)
	return out, err
}

// AccountingCSV is Accounting as CSV, one row per team or user and
// period.
func (c *Client) AccountingCSV(ctx context.Context, q AccountingQuery) ([]byte, error) {
	v := q.values()
	v.Set("format", "csv")
	b, err := c.Do(ctx, http.MethodGet, "/api/v1/accounting", v, nil)
	if err != nil {
		return nil, fmt.Errorf("accounting: %w", err)
	}
	return b, nil
}
