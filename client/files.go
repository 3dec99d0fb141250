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
// archive; PUT .../files/content).

// FileRef names a file or folder of a job's files: Path in Root ("" is
// the job's own folder, Path "" its top) on machine Node ("" is the first
// machine of the job's run, rank 0; each machine of a run on several has
// its own job folder).
type FileRef struct {
	Root, Path, Node string
}

func (f FileRef) query() url.Values {
	q := url.Values{"path": {f.Path}}
	if f.Root != "" {
		q.Set("root", f.Root)
	}
	if f.Node != "" {
		q.Set("node", f.Node)
	}
	return q
}

// Files lists folder f of job id's files.
func (c *Client) Files(ctx context.Context, id int64, f FileRef, opts ...CallOption) (api.FileListing, error) {
	var l api.FileListing
	err := c.getJSON(ctx, jobPath(id)+"/files", f.query(), &l, opts...)
	return l, err
}

// DownloadFile writes file f of job id to w and returns how many bytes
// it wrote.
func (c *Client) DownloadFile(ctx context.Context, id int64, f FileRef, w io.Writer) (int64, error) {
	return c.download(ctx, jobPath(id)+"/files/content", f.query(), w)
}

// DownloadFolder writes folder f of job id to w as a .tar.gz and returns
// how many bytes it wrote.
func (c *Client) DownloadFolder(ctx context.Context, id int64, f FileRef, w io.Writer) (int64, error) {
	return c.download(ctx, jobPath(id)+"/files/archive", f.query(), w)
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

// UploadFile writes size bytes of r (-1: not known) to file f of job id,
// replacing a regular file there.
func (c *Client) UploadFile(ctx context.Context, id int64, f FileRef, r io.Reader, size int64) (api.FileEntry, error) {
	path := jobPath(id) + "/files/content"
	resp, err := c.open(ctx, c.untimed(), http.MethodPut, path, f.query(), r, size, "application/octet-stream", nil)
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
