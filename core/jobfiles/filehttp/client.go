package filehttp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// Dial opens a connection to a job's Server (through its agent).
type Dial func(ctx context.Context) (net.Conn, error)

// Client asks a job's Server, one connection per request.
type Client struct {
	hc *http.Client
}

// NewClient returns a client whose connections dial opens.
//
// It is a jobfiles.Files.
func NewClient(dial Dial) *Client {
	return &Client{hc: &http.Client{Transport: &http.Transport{
		DialContext:           func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives:     true,
		DisableCompression:    true,
		ResponseHeaderTimeout: time.Minute,
		ExpectContinueTimeout: 30 * time.Second,
	}}}
}

func fileURL(op, root, p string) string {
	return "http://job-files/" + op + "?" + url.Values{"root": {root}, "path": {p}}.Encode()
}

// List returns the entries of folder p of root.
func (c *Client) List(ctx context.Context, root, p string) (*jobfiles.Listing, error) {
	resp, err := c.do(ctx, http.MethodGet, fileURL("list", root, p), nil, -1)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var l jobfiles.Listing
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, fmt.Errorf("list %s: read the answer: %w", jobfiles.Where(root, p), err)
	}
	return &l, nil
}

// Open starts the download of file p of root.
func (c *Client) Open(ctx context.Context, root, p string) (*jobfiles.Download, error) {
	return c.download(ctx, "file", root, p)
}

// Archive starts the download of folder p of root as a .tar.gz.
func (c *Client) Archive(ctx context.Context, root, p string) (*jobfiles.Download, error) {
	return c.download(ctx, "archive", root, p)
}

func (c *Client) download(ctx context.Context, op, root, p string) (*jobfiles.Download, error) {
	resp, err := c.do(ctx, http.MethodGet, fileURL(op, root, p), nil, -1)
	if err != nil {
		return nil, err
	}
	d := &jobfiles.Download{Body: resp.Body, Size: resp.ContentLength}
	d.ModTime, _ = http.ParseTime(resp.Header.Get("Last-Modified"))
	return d, nil
}

// Put writes body to file p of root: size bytes, or -1 when not known
// (the server then counts them against its limit as they come).
func (c *Client) Put(ctx context.Context, root, p string, size int64, body io.Reader) (*jobfiles.Entry, error) {
	resp, err := c.do(ctx, http.MethodPut, fileURL("file", root, p), body, size)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var e jobfiles.Entry
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return nil, fmt.Errorf("write %s: read the answer: %w", jobfiles.Where(root, p), err)
	}
	return &e, nil
}

// do sends a request and returns a 2xx answer, or the server's refusal
// as an *Error.
func (c *Client) do(ctx context.Context, method, u string, body io.Reader, size int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		if size >= 0 {
			// The server refuses a file over its limit before it comes.
			req.Header.Set("Expect", "100-continue")
		}
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	e := &jobfiles.Error{}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, e) != nil || e.Msg == "" {
		e = &jobfiles.Error{Kind: kindOf(resp.StatusCode), Msg: "the machine answered " + strconv.Itoa(resp.StatusCode)}
	}
	if resp.StatusCode == http.StatusInternalServerError {
		return nil, fmt.Errorf("the machine could not serve the job's files: %s", e.Msg)
	}
	return nil, e
}

var _ jobfiles.Files = (*Client)(nil)
