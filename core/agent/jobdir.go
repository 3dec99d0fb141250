package agent

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/gpuportal/gpuportal/core/joboutput"
)

// Private job folders. WORK/jobs belongs to the agent's user and others
// may only pass through it (0711), so nobody else creates or renames a
// job's folder there. Each job's folder, WORK/jobs/ID, and its checkpoint
// folder belong to the account the job runs as, with Config.JobDirMode
// (0700 by default): no other account's job can read or write them, and
// the checkpoint folder is the same across the job's runs.
//
// The job's account owns its folder, so it may put a link or a FIFO where
// the agent (root) expects output.log or checkpoint/. The agent therefore
// works inside the folder through file descriptors opened with O_NOFOLLOW,
// never changes what a link points to, and opens nothing but regular files
// and folders.

// DefaultJobDirMode is a job folder's mode unless Config.JobDirMode says
// otherwise.
const DefaultJobDirMode os.FileMode = 0o700

// openJobDir creates or takes over job jobID's folder and checkpoint
// folder for ra (nil: the agent's own user) and opens its output for
// appending.
func (a *Local) openJobDir(jobID int64, ra *runAs) (*os.File, error) {
	mode := a.cfg.JobDirMode
	if mode == 0 {
		mode = DefaultJobDirMode
	}
	uid, gid, owner := -1, -1, "the agent's user"
	if ra != nil && ra.cred != nil {
		uid, gid, owner = ra.uid, ra.gid, ra.name
	}
	dir, err := makeJobDirs(a.jobsDir(), jobID, uid, gid, mode)
	if err != nil {
		return nil, fmt.Errorf("%w (for %s)", err, owner)
	}
	defer syscall.Close(dir)
	fd, err := syscall.Openat(dir, "output.log",
		syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC,
		uint32(mode.Perm()&0o660))
	if err != nil {
		return nil, fmt.Errorf("output of job %d: %w", jobID, pathErr("openat", a.LogPath(jobID), err))
	}
	f := os.NewFile(uintptr(fd), a.LogPath(jobID))
	if err := joboutput.CheckRegular(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("output of job %d: %w", jobID, err)
	}
	if uid >= 0 {
		if err := f.Chown(uid, gid); err != nil {
			f.Close()
			return nil, fmt.Errorf("output of job %d for %s: %w", jobID, owner, err)
		}
	}
	// Back to blocking writes, for the job that inherits it.
	if err := syscall.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, fmt.Errorf("output of job %d: %w", jobID, err)
	}
	return f, nil
}

func (a *Local) jobsDir() string { return a.cfg.WorkDir + "/jobs" }

// writeJobFile writes data to file name of job jobID's folder, made for
// ra (nil: the agent's own user) as openJobDir makes it, replacing what
// was there, never through a link: the rendezvous's hostfile.
func (a *Local) writeJobFile(jobID int64, ra *runAs, name string, data []byte) error {
	mode := a.cfg.JobDirMode
	if mode == 0 {
		mode = DefaultJobDirMode
	}
	uid, gid := -1, -1
	if ra != nil && ra.cred != nil {
		uid, gid = ra.uid, ra.gid
	}
	dir, err := makeJobDirs(a.jobsDir(), jobID, uid, gid, mode)
	if err != nil {
		return err
	}
	defer syscall.Close(dir)
	fd, err := syscall.Openat(dir, name,
		syscall.O_WRONLY|syscall.O_CREAT|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, uint32(mode.Perm()&0o644))
	if err != nil {
		return fmt.Errorf("%s of job %d: %w", name, jobID, pathErr("openat", name, err))
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := joboutput.CheckRegular(f); err != nil {
		return fmt.Errorf("%s of job %d: %w", name, jobID, err)
	}
	if uid >= 0 {
		if err := f.Chown(uid, gid); err != nil {
			return fmt.Errorf("%s of job %d: %w", name, jobID, err)
		}
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("%s of job %d: %w", name, jobID, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("%s of job %d: %w", name, jobID, err)
	}
	return nil
}

// MakeJobDirs creates or takes over job jobID's folder, jobsDir/ID, and
// its checkpoint folder for uid:gid (-1: leave the owner) with mode, never
// through a link: for executors whose jobs write their own output (the
// Slurm executor). jobsDir must be the agent's or server's own, writable
// by nobody else.
func MakeJobDirs(jobsDir string, jobID int64, uid, gid int, mode os.FileMode) error {
	dir, err := makeJobDirs(jobsDir, jobID, uid, gid, mode)
	if err != nil {
		return err
	}
	return syscall.Close(dir)
}

// makeJobDirs is MakeJobDirs, returning the job's folder open.
func makeJobDirs(jobsDir string, jobID int64, uid, gid int, mode os.FileMode) (int, error) {
	jobs, err := openDir(-1, jobsDir)
	if err != nil {
		return -1, fmt.Errorf("job folder: %w", err)
	}
	defer syscall.Close(jobs)
	dir, err := ownedDir(jobs, strconv.FormatInt(jobID, 10), uid, gid, mode)
	if err != nil {
		return -1, fmt.Errorf("job folder: %w", err)
	}
	ckpt, err := ownedDir(dir, "checkpoint", uid, gid, mode)
	if err != nil {
		syscall.Close(dir)
		return -1, fmt.Errorf("checkpoint folder of job %d: %w", jobID, err)
	}
	syscall.Close(ckpt)
	return dir, nil
}

// ownedDir creates folder name in the folder open at parent (if absent),
// opens it without following a link, and gives it to uid:gid (-1: leave
// the owner) with mode.
func ownedDir(parent int, name string, uid, gid int, mode os.FileMode) (int, error) {
	if err := syscall.Mkdirat(parent, name, 0o700); err != nil && !errors.Is(err, syscall.EEXIST) {
		return -1, pathErr("mkdirat", name, err)
	}
	fd, err := openDir(parent, name)
	if err != nil {
		return -1, err
	}
	if uid >= 0 {
		if err := syscall.Fchown(fd, uid, gid); err != nil {
			syscall.Close(fd)
			return -1, pathErr("chown", name, err)
		}
	}
	perm := uint32(mode.Perm())
	if mode&os.ModeSetgid != 0 {
		perm |= syscall.S_ISGID
	}
	if err := syscall.Fchmod(fd, perm); err != nil {
		syscall.Close(fd)
		return -1, pathErr("chmod", name, err)
	}
	return fd, nil
}

// openDir opens folder name (in the folder open at parent; -1: an
// absolute path) for use as a parent, and never through a link.
func openDir(parent int, name string) (int, error) {
	flags := syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	var fd int
	var err error
	if parent < 0 {
		fd, err = syscall.Open(name, flags, 0)
	} else {
		fd, err = syscall.Openat(parent, name, flags, 0)
	}
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return -1, fmt.Errorf("%s is not a folder (a link, or a file, put there by a job?); the agent leaves it alone", name)
	}
	if err != nil {
		return -1, pathErr("open", name, err)
	}
	return fd, nil
}

func pathErr(op, path string, err error) error {
	return &os.PathError{Op: op, Path: path, Err: err}
}
