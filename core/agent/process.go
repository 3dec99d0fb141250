package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startProcess runs the job's command in its own process group with
// CUDA_VISIBLE_DEVICES naming its GPUs. The command is argv, never a shell
// string.
func (a *Local) startProcess(s Spec, log *os.File) (wait func() (int, string), stop func(), err error) {
	cmd := exec.Command(s.Command[0], s.Command[1:]...)
	cmd.Dir = a.jobDir(s.JobID)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	devs := make([]string, len(s.GPUs))
	for i, g := range s.GPUs {
		devs[i] = strconv.Itoa(g)
	}
	cmd.Env = append(os.Environ(),
		"CUDA_VISIBLE_DEVICES="+strings.Join(devs, ","),
		"GPUPORTAL_JOB_ID="+strconv.FormatInt(s.JobID, 10),
	)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(log, "gpuportal: cannot start %q: %v\n", s.Command[0], err)
		return nil, nil, fmt.Errorf("run %q: %w", s.Command[0], err)
	}
	pgid := cmd.Process.Pid
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			go func() {
				time.Sleep(a.cfg.Grace)
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
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
	return wait, stop, nil
}
