package agent

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Slurm's srun inside a job. A Slurm batch script runs its steps with
// srun ("srun python train.py"); a gpuportal job already runs as a Slurm
// step's tasks would (once a machine, or once a GPU with a process per
// GPU), so srun there runs the step as those tasks (package cli/srun). The agent
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

// Container jobs run in their image, whose libraries are not the
// machine's: srun there is a static binary of its own (cmd/gpuportal-srun),
// which the agent mounts read-only at ContainerSrunPath, a folder on the
// PATH of almost every image.
const (
	// ContainerSrunPath is where a container job finds srun.
	ContainerSrunPath = "/usr/local/bin/srun"
	// SrunBinary is the static srun's name, looked for beside the agent's
	// binary.
	SrunBinary = "gpuportal-srun"
)

// FindContainerSrun returns the static srun to mount into container jobs:
// file when given (an error when it is not a static executable), else
// SrunBinary beside the agent's binary exe, else exe itself when it is
// static. It returns "" and why when there is none.
func FindContainerSrun(file, exe string) (found, why string, err error) {
	if file != "" {
		if err := staticExecutable(file); err != nil {
			return "", "", err
		}
		// The runtime mounts a path, not a name relative to its folder.
		abs, err := filepath.Abs(file)
		return abs, "", err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", "", fmt.Errorf("the agent's binary: %w", err)
	}
	beside := filepath.Join(filepath.Dir(exe), SrunBinary)
	besideErr := staticExecutable(beside)
	if besideErr == nil {
		return beside, "", nil
	}
	if staticExecutable(exe) == nil {
		return exe, "", nil
	}
	return "", fmt.Sprintf("the agent's binary is linked dynamically, so it may not run in an image, and %v", besideErr), nil
}

// ContainerSrun is FindContainerSrun for this process's binary: what
// ContainerConfig.Srun should be, warning in log when there is none.
func ContainerSrun(file string, log *slog.Logger) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("this binary: %w", err)
	}
	srun, why, err := FindContainerSrun(file, exe)
	if err == nil && srun == "" {
		log.Warn("container jobs will find no srun: install "+SrunBinary+" beside this binary (or name one with agent --container-srun)", "why", why)
	}
	return srun, err
}

// staticExecutable checks that path is a regular file that all may run,
// an ELF executable with no interpreter (no dynamic loader, so no library
// of the machine's).
func staticExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 != 0o111 {
		return fmt.Errorf("%s: not an executable file that every account may run (mode %v)", path, st.Mode())
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not an executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically: build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}
