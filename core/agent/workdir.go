package agent

import (
	"fmt"
	"os"
	"path/filepath"
)

// The work folder of jobs that run as other accounts than the agent's (or
// the Slurm executor's) user: WORK and WORK/jobs belong to it and others
// may only pass through them (0711), to their own job's folder, which
// MakeJobDirs gives them; every folder above WORK must let them pass.

// OpenJobsDir makes workDir/jobs (and workDir) if absent, sets both to
// 0711, and checks that account u can pass through every folder from /
// down to workDir; nil u: any account, by others' search permission (jobs
// that run as their owners). flag names the setting that chose workDir,
// for the error.
func OpenJobsDir(workDir string, u *User, flag string) error {
	check, who := &runAs{uid: -1}, "the users jobs run as"
	if u != nil {
		check, who = newRunAs(*u, -1), u.Name
	}
	return openJobsDir(workDir, check, who, flag)
}

func openJobsDir(workDir string, check *runAs, who, flag string) error {
	jobs := filepath.Join(workDir, "jobs")
	if err := os.MkdirAll(jobs, 0o711); err != nil {
		return fmt.Errorf("work folder: %w", err)
	}
	for _, dir := range []string{workDir, jobs} {
		if err := os.Chmod(dir, 0o711); err != nil {
			return fmt.Errorf("let jobs' users reach their folders: %w", err)
		}
	}
	if dir, mode, ok := blockedFor(workDir, check); !ok {
		return fmt.Errorf("%s cannot pass through %s (mode %04o) to reach their jobs' folders: let others pass through it (chmod o+x %s) or choose another %s",
			who, dir, mode, dir, flag)
	}
	return nil
}

// Blocked finds the first folder from / down to dir that account u may
// not pass through (nil u: any account, by others' search permission); ok
// when there is none.
func Blocked(dir string, u *User) (blocked string, mode os.FileMode, ok bool) {
	check := &runAs{uid: -1}
	if u != nil {
		check = newRunAs(*u, -1)
	}
	return blockedFor(dir, check)
}
