// Package client is a Go client of gpuportal's REST API (/api/v1): typed
// methods over the api package's types for jobs (submit, get, list,
// cancel, resubmit, arrays, logs, history), the scheduler's queues, the
// machines, teams, the caller's account and notifications. Every method
// takes a context; a refusal of the server is an *Error that names the
// request's field at fault where the server does.
//
// The gpuportal command line (package cli) and the integration tests
// use it; integration/genclient, generated from web/openapi.json, checks
// the description instead.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpuportal/gpuportal/api"
)

// MaxResponse bounds the body of one answer the client reads.
const MaxResponse = 32 << 20

// Client calls one server's REST API with one API token. It is safe for
// concurrent use.
type Client struct {
	base      *url.URL
	token     string
	http      *http.Client
	userAgent string
	// retries are the pauses between the attempts of a submission the
	// server could not answer (Submit).
	retries []time.Duration
}

// Option sets up a Client.
type Option func(*Client)

// WithHTTPClient sends the requests with hc (default: a client with a
// 30-second timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent names the program in each request's User-Agent.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithRetryPauses sets the pauses between the attempts of a submission
// that the server could not answer (DefaultRetryPauses); none: one
// attempt.
func WithRetryPauses(p ...time.Duration) Option {
	return func(c *Client) { c.retries = append([]time.Duration(nil), p...) }
}

// DefaultRetryPauses are the pauses between the attempts of a submission
// the server could not answer: about half a minute in all.
var DefaultRetryPauses = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second}

// New is a client of the server at base (such as https://gpus.example.com)
// presenting token, which may be empty for the routes that need none
// (Version, CreateToken).
func New(base, token string, opts ...Option) (*Client, error) {
	u, err := ParseServer(base)
	if err != nil {
		return nil, err
	}
	c := &Client{
		base: u, token: token, http: &http.Client{Timeout: 30 * time.Second},
		userAgent: "gpuportal-go-client", retries: DefaultRetryPauses,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// ParseServer checks a server's URL: http or https, a host, no query.
func ParseServer(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("server %q: want the portal's URL, such as https://gpus.example.com", s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Server is the server's URL.
func (c *Client) Server() *url.URL { u := *c.base; return &u }

// WithToken is a copy of c that presents token.
func (c *Client) WithToken(token string) *Client {
	d := *c
	d.token = token
	return &d
}

// Error is an answer of the server other than a success.
type Error struct {
	// Server is the server's URL.
	Server string
	Method string
	// Path is the request's path under the server, such as /api/v1/jobs.
	Path   string
	Status int
	// Message is the server's own message ({"error": ...}), or the start
	// of what else came back (a proxy's page).
	Message string
	// Field is the field of the request that a 4xx names ("gpus" of
	// "gpus: must be at least 1", "cpu_profile.cpu_curve"); empty when
	// it names none.
	Field string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// StatusOf is the HTTP status of the server's refusal err, 0 when err is
// none.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// IsNotFound reports whether err is the server's 404.
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }

// FieldOf is the request's field that the server's 4xx err names, or "".
func FieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// fieldRe matches a message that begins with the field at fault, as the
// server's 400s do: "gpus: must be ...", "cpu_profile.cpu_curve: ...",
// "env[2]: ...".
var fieldRe = regexp.MustCompile(`^([a-z][a-z0-9_]*(?:\[[0-9]+\])?(?:\.[a-z][a-z0-9_]*(?:\[[0-9]+\])?)*): `)

// fieldOf is the field a 4xx's message names.
func fieldOf(status int, msg string) string {
	if status < 400 || status >= 500 {
		return ""
	}
	if m := fieldRe.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return ""
}

// Retriable reports whether a request that failed with err may be sent
// again: the server was not reached, or said it cannot serve now (502,
// 503, 504).
func Retriable(err error) bool {
	switch StatusOf(err) {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case 0:
		var ue *url.Error
		return errors.As(err, &ue)
	}
	return false
}

// CallOption asks a call for more of the answer than its value.
type CallOption func(*call)

type call struct {
	raw    *json.RawMessage
	header *http.Header
	reqHdr http.Header
}

// RawJSON copies the answer's body, the JSON as the server sent it, into
// dst: what a program prints to keep fields a newer server adds.
func RawJSON(dst *json.RawMessage) CallOption { return func(c *call) { c.raw = dst } }

// Header copies the answer's headers into dst (Location,
// X-Next-Cursor, X-Log-Size).
func Header(dst *http.Header) CallOption { return func(c *call) { c.header = dst } }

// RequestHeader adds a header to the request.
func RequestHeader(key, value string) CallOption {
	return func(c *call) {
		if c.reqHdr == nil {
			c.reqHdr = http.Header{}
		}
		c.reqHdr.Set(key, value)
	}
}

// Do sends a request to path (under the server's URL, such as
// /api/v1/jobs) with body, if not nil, as JSON, and returns the body of
// a successful answer; any other answer is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body any, opts ...CallOption) ([]byte, error) {
	var cl call
	for _, o := range opts {
		o(&cl)
	}
	raw, h, err := c.send(ctx, method, path, query, body, cl.reqHdr)
	if err != nil {
		return nil, err
	}
	if cl.raw != nil {
		*cl.raw = json.RawMessage(raw)
	}
	if cl.header != nil {
		*cl.header = h
	}
	return raw, nil
}

// getJSON gets path and decodes the answer into out.
func (c *Client) getJSON(ctx context.Context, path string, query url.Values, out any, opts ...CallOption) error {
	return c.call(ctx, http.MethodGet, path, query, nil, out, opts...)
}

// call sends a request and decodes the answer into out.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any, opts ...CallOption) error {
	raw, err := c.Do(ctx, method, path, query, body, opts...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the server's answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any, header http.Header) ([]byte, http.Header, error) {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = query.Encode()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: encode the request: %w", method, path, err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return raw, resp.Header, nil
	}
	msg := serverMessage(resp, raw)
	return nil, nil, &Error{Server: c.base.String(), Method: method, Path: path, Status: resp.StatusCode, Message: msg, Field: fieldOf(resp.StatusCode, msg)}
}

// serverMessage is the error message in an answer: the API's
// {"error": "..."}, or the start of whatever else came back.
func serverMessage(resp *http.Response, raw []byte) string {
	var e api.Error
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		return e.Error
	}
	text := strings.Join(strings.Fields(string(raw)), " ")
	if len(text) > 200 {
		text = text[:200]
		for !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
		text += "..."
	}
	if text == "" {
		return resp.Status
	}
	return resp.Status + ": " + text
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
