package agent

import (
	"context"
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

// startProcess runs the job's command in a session and process group of
// its own with CUDA_VISIBLE_DEVICES naming its GPUs, and extraEnv (the
// gate's variables) added, as user ra (jobRunAs; nil: the agent's own),
// born in the job's v2 cgroup when cgroup is that folder, opened (nil:
// none). The command is argv, never a shell string. The process is killed
// if the agent dies, so no job outlives the agent that tracks it.
//
// Its run ends with it: once the first process has exited, or has been
// stopped, every process of the run that the agent can find without
// cgroups (descendants.go) is killed before wait returns; the job's
// cgroup, where there is one, then ends the rest (limits.end).
func (a *Local) startProcess(s job.Spec, ra *runAs, log *os.File, extraEnv []string, cgroup *os.File) (wait func() (int, string), stop func(), procs runProcs, err error) {
	extraEnv = append([]string{"GPUPORTAL_NODE=" + a.cfg.Name}, extraEnv...)
	env := append(jobEnv(os.Environ(), s, a.cfg.Name, a.CheckpointDir(s.JobID), ra, a.cfg.PassEnv), extraEnv...)
	env = pathFirst(env, a.srunDir)
	argv := s.Command
	if s.Gang.Tasks() > 1 {
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, runProcs{}, fmt.Errorf("a process per GPU: the agent's binary: %w", err)
		}
		argv = tasksArgv(exe, s)
	}
	command := func(cgroup *os.File) *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = jobWorkdir(a.jobDir(s.JobID), s.Dir)
		cmd.Stdout = log
		cmd.Stderr = log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if ra != nil {
			cmd.SysProcAttr.Credential = ra.cred
		}
		if cgroup != nil {
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cgroup.Fd())
		}
		cmd.Env = env
		return cmd
	}
	procs = runProcs{uid: os.Getuid(), marks: []string{
		"GPUPORTAL_CHECKPOINT_DIR=" + a.CheckpointDir(s.JobID), "GPUPORTAL_RUN=" + strconv.FormatInt(s.Run, 10),
	}}
	if ra != nil && ra.cred != nil {
		procs.uid = int(ra.cred.Uid)
	}
	procs.since, _ = bootTicks() // 0 when unknown: every process of the account is looked at
	cmd := command(cgroup)
	err = cmd.Start()
	if err != nil && cgroup != nil {
		// A kernel before 5.7 cannot start a process in a cgroup
		// (CLONE_INTO_CGROUP): it is moved in once it runs (limits.begin).
		inside := err
		cmd = command(nil)
		if err = cmd.Start(); err == nil {
			a.cfg.Logger.Debug("job started outside its cgroup, then moved in: the kernel could not start it inside", "job", s.JobID, "err", inside)
		}
	}
	if err != nil {
		if ra != nil && errors.Is(err, os.ErrPermission) {
			err = fmt.Errorf("%w (can user %s reach %s and run the program?)", err, ra.name, cmd.Dir)
		}
		switch _, serr := os.Stat(cmd.Dir); {
		case errors.Is(serr, os.ErrNotExist):
			// exec says the program is missing when the folder is.
			err = fmt.Errorf("working folder %s does not exist", cmd.Dir)
		case serr != nil:
			err = fmt.Errorf("%w (working folder: %v)", err, serr)
		}
		fmt.Fprintf(log, "gpuportal: cannot start %q: %v\n", s.Command[0], err)
		return nil, nil, runProcs{}, fmt.Errorf("run %q: %w", s.Command[0], err)
	}
	procs.leader = cmd.Process.Pid
	ended := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			procs.signal(syscall.SIGTERM)
			go func() {
				select {
				case <-ended:
				case <-time.After(a.cfg.Grace):
					procs.signal(syscall.SIGKILL)
				}
			}()
		})
	}
	wait = func() (int, string) {
		err := cmd.Wait()
		// Whatever the first process left behind goes too.
		ctx, cancel := context.WithTimeout(context.Background(), reapTimeout)
		if rerr := procs.reap(ctx); rerr != nil {
			a.cfg.Logger.Warn("a job's processes outlive it", "job", s.JobID, "run", s.Run, "err", rerr)
		}
		cancel()
		close(ended)
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, ""
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return -1, job.KilledBy(ws.Signal())
			}
			return ee.ExitCode(), ""
		default:
			return -1, err.Error()
		}
	}
	return wait, stop, procs, nil
}

// reapTimeout bounds how long the end of a run waits for its processes
// to be gone.
const reapTimeout = 30 * time.Second

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
// were checked at submission and are checked again here), and last
// Slurm's variables (job.SlurmEnv) and the rendezvous of a run on several
// machines (job.Gang.Env) on node, the job's GPUs, ID, run, array task
// and checkpoint folder, and the identity
// of the user it runs as (ra; nil: the agent's own), which nothing
// before overrides.
func jobEnv(base []string, s job.Spec, node, checkpointDir string, ra *runAs, pass []string) []string {
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
	env = append(env, job.SlurmEnv(s.JobID, s.Name, len(s.GPUs), s.Gang, s.Array, node)...)
	env = append(env, s.Resources.Env(s.Gang.Tasks())...)
	if s.Gang != nil {
		env = append(env, s.Gang.Env(filepath.Join(filepath.Dir(checkpointDir), job.HostfileName))...)
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

// ParsePassEnv reads --pass-env: variable names, comma-separated.
func ParsePassEnv(list string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if err := CheckPassEnv(names); err != nil {
		return nil, fmt.Errorf("--pass-env: %w", err)
	}
	return names, nil
}

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
