package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/core/jobfiles/filehttp"
)

// A job's files (docs/files.md): the portal lists, downloads and uploads
// them through the agent of the machine that ran the job, inside the job's
// folder and the data paths the agent allows (Config.DataPaths), as the
// account the job runs as. When that is another account than the agent's,
// a helper process (FilesCommand) runs as it, so that the kernel checks
// each access as it would the job's own; jobfiles confines every path to
// its root.

// FilesCommand is the agent binary's hidden command that serves a job's
// files on its standard input and output (filehttp.RunHelper).
const FilesCommand = "agent-files"

// UserToken in a data path's folder stands for the job owner's Unix
// account: /scratch/{user}.
const UserToken = "{user}"

// filesTimeout bounds one request to a job's files, a large download
// included.
const filesTimeout = 2 * time.Hour

// ParseDataPath reads a data path as agent --data-path gives it,
// NAME=/DIR, where DIR may hold UserToken.
func ParseDataPath(s string) (jobfiles.Root, error) {
	name, dir, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return jobfiles.Root{}, fmt.Errorf("%q: want NAME=/DIR, such as scratch=/scratch/%s", s, UserToken)
	case !validRootName(name):
		return jobfiles.Root{}, fmt.Errorf("%q: the name must be 1 to 32 letters, digits, '-' or '_'", s)
	case name == jobfiles.JobRoot:
		return jobfiles.Root{}, fmt.Errorf("%q: %q names the job's own folder", s, jobfiles.JobRoot)
	case !strings.HasPrefix(dir, "/"):
		return jobfiles.Root{}, fmt.Errorf("%q: the folder must be an absolute path", s)
	case strings.Contains(strings.ReplaceAll(dir, UserToken, ""), "{"):
		return jobfiles.Root{}, fmt.Errorf("%q: the only placeholder is %s", s, UserToken)
	}
	return jobfiles.Root{Name: name, Dir: dir}, nil
}

func validRootName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// fileRoots are job jobID's roots for the owner whose Unix account is
// account: its folder, then the data paths (those that name the account
// left out when it is not known).
func (a *Local) fileRoots(jobID int64, account string) []jobfiles.Root {
	roots := []jobfiles.Root{{Name: jobfiles.JobRoot, Dir: a.jobDir(jobID)}}
	for _, r := range a.cfg.DataPaths {
		if strings.Contains(r.Dir, UserToken) {
			if !ValidAccountName(account) {
				continue
			}
			r.Dir = strings.ReplaceAll(r.Dir, UserToken, account)
		}
		roots = append(roots, r)
	}
	return roots
}

// JobFiles are job jobID's files on this machine, served as the account
// the job runs as (account: its owner's Unix account), for the portal
// of serve --dev.
func (a *Local) JobFiles(jobID int64, account string) jobfiles.Files {
	return filehttp.NewClient(func(ctx context.Context) (net.Conn, error) { return a.DialFiles(ctx, jobID, account) })
}

// DialFiles opens a connection to job jobID's files on this machine
// (filehttp.Client speaks over it), served as the account the job runs
// as; account is its owner's Unix account (job.Spec.Account).
func (a *Local) DialFiles(ctx context.Context, jobID int64, account string) (net.Conn, error) {
	if a.cfg.MonitorOnly {
		return nil, fmt.Errorf("files of job %d: %s only monitors its GPUs and keeps no job folders", jobID, a.cfg.Name)
	}
	ra, err := a.jobRunAs(job.Spec{JobID: jobID, Account: account, Command: []string{FilesCommand}})
	if err != nil {
		return nil, fmt.Errorf("files of job %d on %s: %w", jobID, a.cfg.Name, err)
	}
	if ra == nil && !a.owners() && a.cfg.RefuseRoot && a.euid == 0 {
		return nil, fmt.Errorf("files of job %d on %s: %w", jobID, a.cfg.Name, ErrRootJobs)
	}
	s := &filehttp.Server{Roots: a.fileRoots(jobID, account), Limits: a.cfg.FileLimits}
	if a.cfg.MakeDataPaths {
		for _, r := range s.Roots[1:] {
			if err := makeDataPath(r.Dir, ra); err != nil {
				a.cfg.Logger.Warn("make a data path's folder", "root", r.Name, "dir", r.Dir, "err", err)
			}
		}
	}
	mine, theirs := net.Pipe()
	if ra == nil || ra.cred == nil {
		go func() {
			sctx, cancel := context.WithTimeout(context.Background(), filesTimeout)
			defer cancel()
			if err := filehttp.ServeConn(sctx, s, theirs); err != nil {
				a.cfg.Logger.Warn("serve a job's files", "job", jobID, "err", err)
			}
		}()
		return mine, nil
	}
	if err := a.startFilesHelper(jobID, ra, s, theirs); err != nil {
		mine.Close()
		theirs.Close()
		return nil, err
	}
	return mine, nil
}

// makeDataPath makes folder dir, when missing, for the account ra (nil:
// the agent's own): its own, 0700.
func makeDataPath(dir string, ra *runAs) error {
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if ra != nil && ra.cred != nil {
		return os.Chown(dir, ra.uid, ra.gid)
	}
	return nil
}

// startFilesHelper serves s on conn in a helper process that runs as ra:
// the agent's own binary, reached through /proc/self/exe, which the
// account may run even where it cannot reach the binary's folder.
func (a *Local) startFilesHelper(jobID int64, ra *runAs, s *filehttp.Server, conn net.Conn) error {
	hctx, cancel := context.WithTimeout(context.Background(), filesTimeout)
	args := append([]string{FilesCommand}, filehttp.HelperArgs(s.Roots, s.Limits)...)
	cmd := exec.CommandContext(hctx, "/proc/self/exe", args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: ra.cred, Setsid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return fmt.Errorf("files of job %d: %w", jobID, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return fmt.Errorf("files of job %d: %w", jobID, err)
	}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		return fmt.Errorf("files of job %d: start the helper as %s: %w", jobID, ra.name, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(stdin, conn)
		stdin.Close()
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(conn, stdout)
		conn.Close()
	}()
	go func() {
		defer cancel()
		wg.Wait()
		if err := cmd.Wait(); err != nil && !errors.Is(hctx.Err(), context.DeadlineExceeded) {
			a.cfg.Logger.Warn("the files helper of a job failed", "job", jobID, "account", ra.name, "err", err, "stderr", stderr.String())
		}
	}()
	return nil
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 4096 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}
