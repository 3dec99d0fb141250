package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/models"
)

// A job's files (docs/files.md): its folder on the machine that ran it,
// and the data paths that machine's agent allows, read and written as the
// job's Unix account through the agent. Who may: the job's folder is read
// by whoever sees the job (its team, admins), as its output is; the data
// paths are the owner's, so only the owner and admins read them; only
// the owner and admins upload. Every upload is in the audit log, and so
// is every read by someone other than the job's owner: a file or an
// archive downloaded, a data path listed (readAudited).

// FileStore is what the actions on job files read.
type FileStore interface {
	UnixName(ctx context.Context, name string) (string, error)
	Runs(ctx context.Context, jobID int64) ([]models.Run, error)
}

// FileRequest names a file or folder of a job: Root ("" is the job's
// folder) and Path in it ("" or "/" is the root), on machine Node.
type FileRequest struct {
	Root string
	Path string
	// Node is the machine whose files to reach, one of those of the job's
	// current or last run: each machine of a run on several has its own
	// job folder. "" is the first of them (rank 0).
	Node string
}

// FileDownload is a file, or a folder as a .tar.gz, on its way.
type FileDownload struct {
	Body io.ReadCloser
	// Name is the download's file name: the file's, or the folder's
	// with .tar.gz.
	Name string
	// Size is Body's length; -1 when not known (an archive).
	Size int64
}

// canWriteFiles reports whether u may upload into j's files, and read
// its owner's data paths: its owner, or an admin.
func canWriteFiles(u *User, j *models.Job) bool { return mayOpenSession(u, j) }

// jobFiles checks that a may read (or write) req of job id, and returns
// the job, its machines and a client of its files on the one req names
// (req.Node set to it).
func (s *App) jobFiles(ctx context.Context, a Actor, id int64, req *FileRequest, write bool) (*models.Job, []string, jobfiles.Files, error) {
	j, err := s.job(ctx, a, id)
	if err != nil {
		return nil, nil, nil, err
	}
	if req.Root == "" {
		req.Root = jobfiles.JobRoot
	}
	p, err := jobfiles.CleanPath(req.Path)
	if err != nil {
		return nil, nil, nil, filesError(err)
	}
	req.Path = p
	switch {
	case write && !canWriteFiles(a.User, j):
		return nil, nil, nil, forbidden("job %d is %s's: only its owner (or an admin) may upload into its files", j.ID, j.User)
	case req.Root != jobfiles.JobRoot && !canWriteFiles(a.User, j):
		return nil, nil, nil, forbidden("%s is %s's data path: only they (or an admin) may read it", req.Root, j.User)
	}
	machines, err := s.jobMachines(ctx, j)
	if err != nil {
		return nil, nil, nil, err
	}
	if req.Node, err = ChooseMachine(j.ID, machines, req.Node); err != nil {
		return nil, nil, nil, err
	}
	node := req.Node
	account, err := s.cfg.Store.UnixName(ctx, j.User)
	if errors.Is(err, models.ErrNotFound) {
		account = j.User
	} else if err != nil {
		return nil, nil, nil, stored(err)
	}
	var d engine.FilesServer
	for _, n := range s.cfg.Engine.Nodes() {
		if n.Name() == node {
			d, _ = n.(engine.FilesServer)
			if d == nil {
				return nil, nil, nil, &Error{Kind: Unavailable, Msg: fmt.Sprintf("machine %s cannot serve job files (its agent is too old, or it is a monitor)", node)}
			}
		}
	}
	if d == nil {
		hint := ""
		if s.cfg.Leader != nil && !s.cfg.Leader() {
			hint = " (this replica is a follower: files are reached through the leader)"
		}
		return nil, nil, nil, &Error{Kind: Unavailable, Msg: fmt.Sprintf("job %d's files are on machine %s, which is not connected to this server%s", j.ID, node, hint)}
	}
	return j, machines, d.JobFiles(j.ID, account), nil
}

// jobMachines are the machines of j's current or last run, in placement
// order (rank 0 first), each holding its own job folder.
func (s *App) jobMachines(ctx context.Context, j *models.Job) ([]string, error) {
	placement := []string(j.Placement)
	if len(placement) == 0 {
		runs, err := s.cfg.Store.Runs(ctx, j.ID)
		if err != nil {
			return nil, stored(err)
		}
		for i := len(runs) - 1; i >= 0 && len(placement) == 0; i-- {
			if runs[i].Placement != "" {
				placement = strings.Split(runs[i].Placement, ",")
			}
		}
	}
	machines := gpu.PlacementNodes(placement)
	if len(machines) == 0 {
		return nil, conflict("job %d has not run on a machine yet: it has no files", j.ID)
	}
	return machines, nil
}

// ChooseMachine is the machine of job id, which runs (or ran last) on
// machines in placement order, that a request naming node reaches: node,
// one of them, or with node "" the first (rank 0; "" when there is none).
// A machine the job did not run on is refused, naming those it did.
func ChooseMachine(id int64, machines []string, node string) (string, error) {
	switch {
	case node == "" && len(machines) > 0:
		return machines[0], nil
	case node == "" || slices.Contains(machines, node):
		return node, nil
	case len(machines) == 0:
		return "", invalid("node", "node: job %d has not run on a machine", id)
	}
	return "", invalid("node", "node: job %d runs (or ran last) on %s, not %q", id, strings.Join(machines, ", "), node)
}

// filesError turns a refusal of the job's files into the action's.
func filesError(err error) error {
	var fe *jobfiles.Error
	var ae *Error
	switch {
	case errors.As(err, &ae):
		return ae
	case !errors.As(err, &fe):
		return &Error{Kind: Unavailable, Msg: "cannot reach the job's files: " + err.Error(), Err: err}
	}
	switch fe.Kind {
	case jobfiles.NotFound:
		return &Error{Kind: NotFound, Msg: fe.Msg}
	case jobfiles.Denied:
		return &Error{Kind: Forbidden, Msg: fe.Msg}
	case jobfiles.TooLarge:
		return &Error{Kind: TooLarge, Field: "file", Msg: fe.Msg}
	}
	return &Error{Kind: Invalid, Field: "path", Msg: fe.Msg}
}

// JobFiles lists folder req of job id's files.
func (s *App) JobFiles(ctx context.Context, a Actor, id int64, req FileRequest) (*api.FileListing, error) {
	j, machines, c, err := s.jobFiles(ctx, a, id, &req, false)
	if err != nil {
		return nil, err
	}
	l, err := c.List(ctx, req.Root, req.Path)
	if err != nil {
		return nil, filesError(err)
	}
	out := &api.FileListing{Job: j.ID, Node: req.Node, Nodes: machines, Root: l.Root, Path: l.Path, Roots: l.Roots, Truncated: l.Truncated,
		MaxUploadBytes: l.Limits.MaxUpload, MaxArchiveBytes: l.Limits.MaxArchive, CanUpload: canWriteFiles(a.User, j),
		Entries: make([]api.FileEntry, len(l.Entries))}
	if !canWriteFiles(a.User, j) {
		out.Roots = []string{jobfiles.JobRoot} // the data paths are the owner's
	}
	if req.Root != jobfiles.JobRoot {
		if err := s.readAudited(ctx, a, j, "job.files.list", req); err != nil {
			return nil, err
		}
	}
	for i, e := range l.Entries {
		out.Entries[i] = api.FileEntry{Name: e.Name, Type: e.Type, Size: e.Size, ModTime: e.ModTime, Target: e.Target}
	}
	return out, nil
}

// JobCheckpoints lists job id's checkpoint folder; nil when the job has
// none yet (it has not run, or wrote none).
func (s *App) JobCheckpoints(ctx context.Context, a Actor, id int64) (*api.FileListing, error) {
	if _, err := s.job(ctx, a, id); err != nil {
		return nil, err
	}
	l, err := s.JobFiles(ctx, a, id, FileRequest{Root: jobfiles.JobRoot, Path: jobfiles.CheckpointDir})
	if k := KindOf(err); k == NotFound || k == Conflict {
		return nil, nil
	}
	return l, err
}

// OpenJobFile starts the download of file req of job id.
func (s *App) OpenJobFile(ctx context.Context, a Actor, id int64, req FileRequest) (*FileDownload, error) {
	j, _, c, err := s.jobFiles(ctx, a, id, &req, false)
	if err != nil {
		return nil, err
	}
	d, err := c.Open(ctx, req.Root, req.Path)
	if err != nil {
		return nil, filesError(err)
	}
	if err := s.readAudited(ctx, a, j, "job.files.read", req); err != nil {
		d.Body.Close()
		return nil, err
	}
	return &FileDownload{Body: d.Body, Name: path.Base(req.Path), Size: d.Size}, nil
}

// ArchiveJobFiles starts the download of folder req of job id as a
// .tar.gz.
func (s *App) ArchiveJobFiles(ctx context.Context, a Actor, id int64, req FileRequest) (*FileDownload, error) {
	j, _, c, err := s.jobFiles(ctx, a, id, &req, false)
	if err != nil {
		return nil, err
	}
	d, err := c.Archive(ctx, req.Root, req.Path)
	if err != nil {
		return nil, filesError(err)
	}
	if err := s.readAudited(ctx, a, j, "job.files.archive", req); err != nil {
		d.Body.Close()
		return nil, err
	}
	name := path.Base(req.Path)
	if req.Path == "." {
		name = fmt.Sprintf("job-%d-%s", j.ID, req.Root)
	}
	return &FileDownload{Body: d.Body, Name: name + ".tar.gz", Size: -1}, nil
}

// UploadJobFile writes body, size bytes (-1: not known), to file req of
// job id, replacing a regular file there: its owner's or an admin's, as
// the job's account, within the machine's upload limit. Recorded in the
// audit log.
func (s *App) UploadJobFile(ctx context.Context, a Actor, id int64, req FileRequest, size int64, body io.Reader) (*api.FileEntry, error) {
	j, _, c, err := s.jobFiles(ctx, a, id, &req, true)
	if err != nil {
		return nil, err
	}
	if req.Path == "." {
		return nil, invalid("path", "path: name the file to write")
	}
	e, err := c.Put(ctx, req.Root, req.Path, size, body)
	if err != nil {
		return nil, filesError(err)
	}
	if err := s.audit(ctx, a, "job.files.upload", fmt.Sprintf("job %d of %s", j.ID, j.User),
		fmt.Sprintf("%s:%s, %d bytes, on %s", req.Root, req.Path, e.Size, req.Node)); err != nil {
		return nil, err
	}
	return &api.FileEntry{Name: e.Name, Type: e.Type, Size: e.Size, ModTime: e.ModTime}, nil
}

// readAudited records in the audit log that a, who is not j's owner
// (an admin, a teammate), read req of j's files (on req.Node); the
// owner's own reads are not recorded. A read the log cannot record is
// refused.
func (s *App) readAudited(ctx context.Context, a Actor, j *models.Job, action string, req FileRequest) error {
	if a.User.Name == j.User {
		return nil
	}
	return s.audit(ctx, a, action, fmt.Sprintf("job %d of %s", j.ID, j.User), fmt.Sprintf("%s, on %s", jobfiles.Where(req.Root, req.Path), req.Node))
}
