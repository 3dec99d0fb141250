package web

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/templates"
)

// A job's files (docs/files.md): the REST API under
// /api/v1/jobs/ID/files, the files page and the checkpoints on the job's
// page. The actions (app/files.go) decide who may; these parse, call
// and render.

// fileBodyLimit bounds an uploaded file's request: the machine's own
// limit (agent --max-upload) is the one that counts.
const fileBodyLimit = 64 << 30

// fileRequest reads ?root=&path=&node=.
func fileRequest(c echo.Context) app.FileRequest {
	return app.FileRequest{Root: c.QueryParam("root"), Path: c.QueryParam("path"), Node: c.QueryParam("node")}
}

// apiJobFiles is GET /api/v1/jobs/:id/files: a folder's entries.
func (s *Server) apiJobFiles(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	l, err := s.app.JobFiles(c.Request().Context(), appActor(c), id, fileRequest(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

// jobFileContent is GET .../files/content: a file's bytes, as a download.
func (s *Server) jobFileContent(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	d, err := s.app.OpenJobFile(c.Request().Context(), appActor(c), id, fileRequest(c))
	if err != nil {
		return err
	}
	return sendDownload(c, d, "application/octet-stream")
}

// jobFileArchive is GET .../files/archive: a folder as a .tar.gz.
func (s *Server) jobFileArchive(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	d, err := s.app.ArchiveJobFiles(c.Request().Context(), appActor(c), id, fileRequest(c))
	if err != nil {
		return err
	}
	return sendDownload(c, d, "application/gzip")
}

// sendDownload streams d as an attachment.
func sendDownload(c echo.Context, d *app.FileDownload, contentType string) error {
	defer d.Body.Close()
	_ = http.NewResponseController(c.Response()).SetWriteDeadline(time.Now().Add(downloadTimeout))
	h := c.Response().Header()
	h.Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": d.Name}))
	if d.Size >= 0 {
		h.Set(echo.HeaderContentLength, strconv.FormatInt(d.Size, 10))
	}
	c.Response().Header().Set(echo.HeaderContentType, contentType)
	c.Response().WriteHeader(http.StatusOK)
	// Once the answer has begun, a failure can only cut it short.
	_, _ = io.Copy(c.Response(), d.Body)
	return nil
}

// apiUploadJobFile is PUT /api/v1/jobs/:id/files/content: the body
// becomes file ?path= of ?root=.
func (s *Server) apiUploadJobFile(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	r := c.Request()
	_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(downloadTimeout))
	e, err := s.app.UploadJobFile(r.Context(), appActor(c), id, fileRequest(c), r.ContentLength, r.Body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, e)
}

// longBody gives a request with a large body (an upload) the time to
// send it, before anything reads it.
func longBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(downloadTimeout))
		return next(c)
	}
}

// uploadFilesForm is POST /jobs/:id/files/upload, the files page's form
// (multipart/form-data: _csrf, root and path, then the file, in the
// order the page sends them): the file goes into folder path of root,
// under its own name. It streams to the machine's agent as it comes,
// neither held in memory nor spooled to a file here, and the agent
// counts it against its upload limit (413 naming it).
func (s *Server) uploadFilesForm(c echo.Context) error {
	j, err := s.loadJob(c)
	if err != nil {
		return drainUpload(c, err)
	}
	mr, err := c.Request().MultipartReader()
	if err != nil {
		return drainUpload(c, badRequest("body: send the form as multipart/form-data"))
	}
	fields := map[string]string{}
	for {
		part, err := mr.NextPart()
		var tooLarge *http.MaxBytesError
		switch {
		case err == io.EOF:
			return badRequest("file: choose a file to upload")
		case errors.As(err, &tooLarge):
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("body: at most %s", jobfiles.FormatBytes(tooLarge.Limit)))
		case err != nil:
			return drainUpload(c, badRequest("body: the form could not be read"))
		}
		field := part.FormName()
		if field != "file" {
			v, err := io.ReadAll(io.LimitReader(part, uploadFieldMax+1))
			switch {
			case err != nil:
				return drainUpload(c, badRequest("%s: could not be read", field))
			case len(v) > uploadFieldMax:
				return drainUpload(c, badRequest("%s: longer than %d bytes", field, uploadFieldMax))
			}
			if msg := textProblem(field + string(v)); msg != "" {
				return drainUpload(c, badRequest("%s: %s", field, msg))
			}
			fields[field] = string(v)
			continue
		}
		// The file: the fields before it are all the form says.
		if checked, _ := c.Get(csrfCheckedKey).(bool); !checked {
			if err := checkCSRF(c, fields[csrfField]); err != nil {
				return drainUpload(c, err)
			}
		}
		name := path.Base(strings.ReplaceAll(part.FileName(), "\\", "/"))
		if part.FileName() == "" || name == "." || name == "/" || name == ".." {
			if part.FileName() == "" {
				return drainUpload(c, badRequest("file: choose a file to upload"))
			}
			return drainUpload(c, badRequest("file: its name %q cannot name a file", part.FileName()))
		}
		if msg := textProblem(name); msg != "" {
			return drainUpload(c, badRequest("file: its name %s", msg))
		}
		at := fileAt{job: j.ID, node: fields["node"], root: fields["root"]}
		dir := fields["path"]
		e, err := s.app.UploadJobFile(c.Request().Context(), appActor(c), j.ID, app.FileRequest{Root: at.root, Path: dir + "/" + name, Node: at.node}, -1, part)
		if err != nil {
			return drainUpload(c, err)
		}
		return c.Redirect(http.StatusSeeOther, at.files(dir)+"&uploaded="+url.QueryEscape(e.Name))
	}
}

// uploadFieldMax bounds each field of the upload form but the file.
const uploadFieldMax = 8 << 10

// drainUpload reads and drops what is left of an upload's body before
// answering err, so that the browser, which sends the whole file before
// it reads an answer, reads the refusal rather than a broken connection.
// The route's body limit and read deadline bound it.
func drainUpload(c echo.Context, err error) error {
	_, _ = io.Copy(io.Discard, c.Request().Body)
	return err
}

// fileAt is a root of a job's files on one of its machines, for links:
// node "" is the job's first machine, and is what a job on one machine
// links with.
type fileAt struct {
	job        int64
	node, root string
}

// query is ?root=&path=[&node=] of folder or file p.
func (at fileAt) query(p string) string {
	q := url.Values{"root": {cmpRoot(at.root)}, "path": {p}}
	if at.node != "" {
		q.Set("node", at.node)
	}
	return q.Encode()
}

// files is the files page of folder p.
func (at fileAt) files(p string) string {
	return fmt.Sprintf("/jobs/%d/files?", at.job) + at.query(p)
}

// op is the link that does op (content, archive) to p.
func (at fileAt) op(op, p string) string {
	return fmt.Sprintf("/jobs/%d/files/%s?", at.job, op) + at.query(p)
}

// listingAt is where listing l is: its machine named only for a job
// on several.
func listingAt(l *api.FileListing) fileAt {
	at := fileAt{job: l.Job, root: l.Root}
	if len(l.Nodes) > 1 {
		at.node = l.Node
	}
	return at
}

func cmpRoot(root string) string {
	if root == "" {
		return jobfiles.JobRoot
	}
	return root
}

// jobFilesPage is GET /jobs/:id/files: a folder of the job's files.
func (s *Server) jobFilesPage(c echo.Context) error {
	j, err := s.loadJob(c)
	if err != nil {
		return err
	}
	req := fileRequest(c)
	req.Root = cmpRoot(req.Root)
	f := templates.FilesView{JobID: j.ID, JobName: j.Name, Root: req.Root, Path: ".", Uploaded: c.QueryParam("uploaded"), Node: req.Node, LinkNode: req.Node}
	if p, err := jobfiles.CleanPath(req.Path); err == nil {
		f.Path = p
	}
	status := http.StatusOK
	l, err := s.app.JobFiles(c.Request().Context(), appActor(c), j.ID, req)
	switch k := app.KindOf(err); {
	case err == nil:
		filesView(l, &f)
	case k == 0:
		return err
	default:
		f.Error, status = err.Error(), appStatus(k)
		if k == app.Conflict {
			status = http.StatusOK // it has not run: nothing is wrong
		}
		f.Roots = []templates.FileLink{{Name: req.Root, URL: fileAt{job: j.ID, node: req.Node, root: req.Root}.files(""), Current: true}}
	}
	f.Crumbs = fileCrumbs(fileAt{job: j.ID, node: f.LinkNode, root: f.Root}, f.Path)
	return s.render(c, status, templates.JobFilesPage(page(c, fmt.Sprintf("Files of job %d", j.ID), "jobs"), f))
}

// filesView fills f from listing l.
func filesView(l *api.FileListing, f *templates.FilesView) {
	at := listingAt(l)
	f.Node, f.LinkNode, f.Path, f.Truncated, f.CanUpload = l.Node, at.node, l.Path, l.Truncated, l.CanUpload
	f.UploadLimit, f.ArchiveLimit = jobfiles.FormatBytes(l.MaxUploadBytes), jobfiles.FormatBytes(l.MaxArchiveBytes)
	f.ArchiveURL = at.op("archive", l.Path)
	for _, r := range l.Roots {
		f.Roots = append(f.Roots, templates.FileLink{Name: r, URL: fileAt{job: l.Job, node: at.node, root: r}.files(""), Current: r == l.Root})
	}
	if len(l.Nodes) > 1 {
		for _, n := range l.Nodes {
			f.Machines = append(f.Machines, templates.FileLink{Name: n, URL: fileAt{job: l.Job, node: n, root: l.Root}.files(l.Path), Current: n == l.Node})
		}
	}
	f.Rows = fileRows(l)
}

// fileRows are l's entries as rows that open folders and download files.
func fileRows(l *api.FileListing) []templates.FileRow {
	rows := make([]templates.FileRow, 0, len(l.Entries))
	at := listingAt(l)
	for _, e := range l.Entries {
		p := path.Join(l.Path, e.Name)
		r := templates.FileRow{Name: e.Name, Type: e.Type, Target: e.Target, Modified: e.ModTime.Local().Format(timeLayout)}
		switch e.Type {
		case jobfiles.TypeDir:
			r.URL, r.ArchiveURL, r.Size = at.files(p), at.op("archive", p), "—"
		case jobfiles.TypeFile:
			r.URL, r.Size = at.op("content", p), jobfiles.FormatBytes(e.Size)
		}
		rows = append(rows, r)
	}
	return rows
}

// fileCrumbs link each folder from at's root down to p.
func fileCrumbs(at fileAt, p string) []templates.FileLink {
	crumbs := []templates.FileLink{{Name: at.root + ":", URL: at.files(""), Current: p == "."}}
	if p == "." {
		return crumbs
	}
	parts := strings.Split(p, "/")
	for i, name := range parts {
		crumbs = append(crumbs, templates.FileLink{Name: name, URL: at.files(strings.Join(parts[:i+1], "/")), Current: i == len(parts)-1})
	}
	return crumbs
}

// jobCheckpointsPart is GET /jobs/:id/files/checkpoints: the checkpoint
// folder for the job's page.
func (s *Server) jobCheckpointsPart(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	at := fileAt{job: id, root: jobfiles.JobRoot}
	v := templates.CheckpointsView{JobID: id, BrowseURL: at.files(jobfiles.CheckpointDir), ArchiveURL: at.op("archive", jobfiles.CheckpointDir)}
	l, err := s.app.JobCheckpoints(c.Request().Context(), appActor(c), id)
	switch k := app.KindOf(err); {
	case err == nil && l != nil:
		v.Rows = fileRows(l)
	case err == nil:
	case k == 0 || k == app.NotFound: // the job's own refusal
		return err
	default:
		v.Note = "The checkpoints cannot be listed now: " + err.Error()
	}
	v.Copies = strings.Join(copyLines(s.app.CheckpointCopies(id)), "; ")
	return s.render(c, http.StatusOK, templates.JobCheckpoints(v))
}

// copyLines say what the server keeps of a job's checkpoint folders:
// "saved 2026-11-30 08:23:35 UTC by run 1 on ck-a, 4 MiB", a part's rank
// first when the job has several.
func copyLines(copies []api.CheckpointCopy) []string {
	var out []string
	for _, c := range copies {
		line := "saved " + c.WrittenAt.UTC().Format("2006-01-02 15:04:05") + " UTC"
		if c.Run > 0 {
			line += fmt.Sprintf(" by run %d", c.Run)
		}
		line += fmt.Sprintf(" on %s, %s", c.Node, jobfiles.FormatBytes(c.Bytes))
		if len(copies) > 1 {
			line = fmt.Sprintf("rank %d: %s", c.Part, line)
		}
		out = append(out, line)
	}
	return out
}
