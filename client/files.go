package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/gpuportal/gpuportal/api"
)

// A job's files (GET /api/v1/jobs/{id}/files and its content and
// archive; PUT .../files/content): root "" is the job's own folder, path
// "" its top.

func fileQuery(root, p string) url.Values {
	q := url.Values{"path": {p}}
	if root != "" {
		q.Set("root", root)
	}
	return q
}

// Files lists folder p of root of job id's files.
func (c *Client) Files(ctx context.Context, id int64, root, p string, opts ...CallOption) (api.FileListing, error) {
	var l api.FileListing
	err := c.getJSON(ctx, jobPath(id)+"/files", fileQuery(root, p), &l, opts...)
	return l, err
}

// DownloadFile writes file p of root of job id to w and returns how many
// bytes it wrote.
func (c *Client) DownloadFile(ctx context.Context, id int64, root, p string, w io.Writer) (int64, error) {
	return c.download(ctx, jobPath(id)+"/files/content", fileQuery(root, p), w)
}

// DownloadFolder writes folder p of root of job id to w as a .tar.gz and
// returns how many bytes it wrote.
func (c *Client) DownloadFolder(ctx context.Context, id int64, root, p string, w io.Writer) (int64, error) {
	return c.download(ctx, jobPath(id)+"/files/archive", fileQuery(root, p), w)
}

func (c *Client) download(ctx context.Context, path string, q url.Values, w io.Writer) (int64, error) {
	resp, err := c.open(ctx, c.untimed(), http.MethodGet, path, q, nil, 0, "", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("GET %s: %d of %d bytes came", path, n, resp.ContentLength)
	}
	return n, nil
}

// UploadFile writes size bytes of r (-1: not known) to file p of root of
// job id, replacing a regular file there.
func (c *Client) UploadFile(ctx context.Context, id int64, root, p string, r io.Reader, size int64) (api.FileEntry, error) {
	path := jobPath(id) + "/files/content"
	resp, err := c.open(ctx, c.untimed(), http.MethodPut, path, fileQuery(root, p), r, size, "application/octet-stream", nil)
	if err != nil {
		return api.FileEntry{}, err
	}
	defer resp.Body.Close()
	var e api.FileEntry
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxResponse)).Decode(&e); err != nil {
		return e, fmt.Errorf("PUT %s: the server's answer is not the expected JSON: %w", path, err)
	}
	return e, nil
}

// untimed is the client's HTTP client without its time limit, for
// transfers as long as their files: the context bounds them.
func (c *Client) untimed() *http.Client {
	hc := *c.http
	hc.Timeout = 0
	return &hc
}
