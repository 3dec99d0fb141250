package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// startProcess runs the job's command in its own process group with
// CUDA_VISIBLE_DEVICES naming its GPUs, and extraEnv (the gate's
// variables) added, as user ra (jobRunAs; nil: the agent's own). The
// command is argv, never a shell string. The process is killed if the
// agent dies, so no job outlives the agent that tracks it.
func (a *Local) startProcess(s job.Spec, ra *runAs, log *os.File, extraEnv []string) (wait func() (int, string), stop func(), pgid int, err error) {
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir = jobWorkdir(a.jobDir(s.JobID), s.Dir)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ra != nil {
		cmd.SysProcAttr.Credential = ra.cred
	}
	extraEnv = append([]string{"GPUPORTAL_NODE=" + a.cfg.Name}, extraEnv...)
	cmd.Env = append(jobEnv(os.Environ(), s, a.CheckpointDir(s.JobID), ra, a.cfg.PassEnv), extraEnv...)
	if err := cmd.Start(); err != nil {
		if ra != nil && errors.Is(err, os.ErrPermission) {
			err = fmt.Errorf("%w (can user %s reach %s and run the program?)", err, ra.name, cmd.Dir)
		}
		if _, serr := os.Stat(cmd.Dir); serr != nil {
			err = fmt.Errorf("%w (working folder: %v)", err, serr)
		}
		fmt.Fprintf(log, "gpuportal: cannot start %q: %v\n", s.Command[0], err)
		return nil, nil, 0, fmt.Errorf("run %q: %w", s.Command[0], err)
	}
	pgid = cmd.Process.Pid
	var once sync.Once
	stop = func() {
		once.Do(func() {
			strays := stragglers(pgid, pgid) // descendants.go
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			for _, s := range strays {
				s.signal(syscall.SIGTERM)
			}
			go func() {
				time.Sleep(a.cfg.Grace)
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				for _, s := range strays {
					s.signal(syscall.SIGKILL)
				}
			}()
		})
	}
	wait = func() (int, string) {
		err := cmd.Wait()
		// Whatever the main process left behind in its group goes too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, ""
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return -1, "killed by " + ws.Signal().String()
			}
			return ee.ExitCode(), ""
		default:
			return -1, err.Error()
		}
	}
	return wait, stop, pgid, nil
}

// jobWorkdir is the folder a job starts in: dir as the job asked,
// relative to its job folder jobDir when not absolute; jobDir when it
// asked for none.
func jobWorkdir(jobDir, dir string) string {
	switch {
	case dir == "":
		return jobDir
	case filepath.IsAbs(dir):
		return filepath.Clean(dir)
	}
	return filepath.Join(jobDir, dir)
}

// jobEnv is a job's environment. Nothing of the agent's own environment
// reaches it but the variables of the minimal environment (KeptEnv) and
// those the operator names with --pass-env (pass): secrets in the agent's
// environment (a cloud key, a database password, the agent's token) are
// never a job's. Then come the job's own variables (s.Env, whose names
// were checked at submission and are checked again here), and last the
// job's GPUs, ID, run, array task and checkpoint folder, and the identity
// of the user it runs as (ra; nil: the agent's own), which nothing
// before overrides.
func jobEnv(base []string, s job.Spec, checkpointDir string, ra *runAs, pass []string) []string {
	keep := func(name string) bool {
		if strings.HasPrefix(name, "GPUPORTAL_") || name == "CUDA_VISIBLE_DEVICES" {
			return false // the job's own come next
		}
		if ra != nil && (name == "HOME" || name == "USER" || name == "LOGNAME") {
			return false
		}
		return slices.Contains(KeptEnv, name) || strings.HasPrefix(name, "LC_") || slices.Contains(pass, name)
	}
	env := make([]string, 0, len(KeptEnv)+len(pass)+8)
	hasPath := false
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if keep(name) {
			env = append(env, kv)
			hasPath = hasPath || name == "PATH"
		}
	}
	if !hasPath {
		env = append(env, "PATH="+DefaultPath)
	}
	for _, kv := range s.Env {
		name, _, _ := strings.Cut(kv, "=")
		if job.CheckEnvName(name) != nil || (ra != nil && (name == "HOME" || name == "USER" || name == "LOGNAME")) {
			continue
		}
		env = append(env, kv)
	}
	devs := make([]string, len(s.GPUs))
	for i, g := range s.GPUs {
		devs[i] = strconv.Itoa(g)
	}
	env = append(env,
		"CUDA_VISIBLE_DEVICES="+strings.Join(devs, ","),
		"GPUPORTAL_JOB_ID="+strconv.FormatInt(s.JobID, 10),
		"GPUPORTAL_RUN="+strconv.FormatInt(s.Run, 10),
		"GPUPORTAL_CHECKPOINT_DIR="+checkpointDir,
	)
	env = append(env, s.Array.Env()...)
	if ra != nil {
		env = append(env, "HOME="+ra.home, "USER="+ra.name, "LOGNAME="+ra.name)
	}
	return env
}

// KeptEnv are the variables of the agent's environment that every job
// gets (with LC_*): the rest stay the agent's unless named by --pass-env.
var KeptEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TERM", "SHELL", "TMPDIR"}

// DefaultPath is a job's PATH when the agent has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckPassEnv checks the names given to --pass-env: variable names, and
// none of the agent's own (GPUPORTAL_*) or the job's GPUs.
func CheckPassEnv(names []string) error {
	for _, n := range names {
		switch {
		case !envNameRe.MatchString(n):
			return fmt.Errorf("%q is not a variable name (letters, digits and _, not starting with a digit)", n)
		case strings.HasPrefix(n, "GPUPORTAL_") || n == "CUDA_VISIBLE_DEVICES":
			return fmt.Errorf("%s is set by the agent for each job and cannot be passed through", n)
		}
	}
	return nil
}
