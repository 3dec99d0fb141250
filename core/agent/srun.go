package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Slurm's srun inside a job. A Slurm batch script runs its steps with
// srun ("srun python train.py"); a gpuportal job already runs as a Slurm
// step's tasks would (once a machine, or once a GPU with a process per
// GPU), so srun there runs the step as those tasks (cli.Srun). The agent
// puts a program of that name first on each command job's PATH: a link,
// in a folder of the agent's own (WORK/bin, which no job may write), to
// the agent's binary, which acts as srun when started under that name.

// SrunCommand is the name under which the agent's binary acts as srun.
const SrunCommand = "srun"

// SrunDir is where srun is linked under the work folder workDir.
func SrunDir(workDir string) string { return filepath.Join(workDir, "bin") }

// linkSrun makes SrunDir(workDir)/srun a link to the binary exe, replacing
// what was there (an older binary's link), and returns the folder. The
// folder is the agent's and readable by all: the accounts jobs run as
// reach it through the work folder, which they may pass through.
func linkSrun(workDir, exe string) (string, error) {
	dir := SrunDir(workDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("srun for jobs: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", fmt.Errorf("srun for jobs: %w", err)
	}
	link := filepath.Join(dir, SrunCommand)
	if target, err := os.Readlink(link); err == nil && target == exe {
		return dir, nil
	}
	tmp := link + ".new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("srun for jobs: %w", err)
	}
	if err := os.Symlink(exe, tmp); err != nil {
		return "", fmt.Errorf("srun for jobs: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		return "", fmt.Errorf("srun for jobs: %w", err)
	}
	return dir, nil
}

// pathFirst returns env with dir first on its PATH: the last PATH
// entry, which is the one a process sees (a job's own PATH comes after
// the agent's). env is changed in place.
func pathFirst(env []string, dir string) []string {
	if dir == "" {
		return env
	}
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			if v == "" {
				env[i] = "PATH=" + dir
			} else {
				env[i] = "PATH=" + dir + string(os.PathListSeparator) + v
			}
			return env
		}
	}
	return append(env, "PATH="+dir+string(os.PathListSeparator)+DefaultPath)
}

// setupSrun links srun for a's jobs and returns its folder, or "" (and
// says why in the log) when it cannot: jobs then find no srun, or the
// machine's own.
func (a *Local) setupSrun() string {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	var dir string
	if err == nil {
		dir, err = linkSrun(a.cfg.WorkDir, exe)
	}
	if err != nil {
		a.cfg.Logger.Warn("jobs will find no srun of gpuportal's", "err", err)
		return ""
	}
	if check, who, other := otherAccounts(a.cfg, a.runAs); other {
		if blocked, mode, ok := blockedFor(filepath.Dir(exe), check); !ok {
			a.cfg.Logger.Warn("jobs run as other accounts cannot run srun: a folder above the agent's binary shuts them out",
				"accounts", who, "binary", exe, "folder", blocked, "mode", fmt.Sprintf("%04o", mode))
		}
	}
	return dir
}
