package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// A process per GPU (job.Gang.TasksPerGPU), as srun --ntasks-per-gpu=1
// starts them: the agent runs its own binary as the run's first process,
// "gpuportal run-tasks", which starts the job's command once per task
// with its RANK and LOCAL_RANK (from job.Gang.FirstRank) and waits for them.
// The tasks stay in its session and process group, so the agent stops
// and finds them as it does any run's processes. The first task that
// fails ends the others, and the run ends with its code.

// TasksCommand is the agent binary's command that runs a part's tasks.
const TasksCommand = "run-tasks"

// TasksGrace is the time the other tasks get between SIGTERM and SIGKILL
// once one failed: run-tasks' default (--grace) and srun's.
const TasksGrace = 10 * time.Second

// tasksArgv is the argv that runs s's command once per task of its part
// through the agent's binary exe.
func tasksArgv(exe string, s job.Spec) []string {
	return append([]string{exe, TasksCommand, "--tasks", strconv.Itoa(s.Gang.Tasks()),
		"--first-rank", strconv.Itoa(s.Gang.FirstRank()), "--"}, s.Command...)
}

// Tasks are the processes RunTasks starts: N of them, task i with RANK
// and SLURM_PROCID FirstRank+i and LOCAL_RANK and SLURM_LOCALID
// FirstLocal+i, and Env (NAME=value) added to each's environment.
type Tasks struct {
	N, FirstRank, FirstLocal int
	Env                      []string
}

// RunTasks is the run-tasks command (and srun's inside a job, for the
// tasks a step starts on one): argv started as t says, from this
// process's environment. It returns once all have exited: 0 if all
// succeeded, else the code of the first that failed (128+signal for one
// killed), having sent the others SIGTERM, and SIGKILL grace later.
// Ending ctx (the launcher got SIGTERM) sends every task SIGTERM.
func RunTasks(ctx context.Context, t Tasks, argv []string, grace time.Duration, stderr io.Writer) int {
	n, firstRank := t.N, t.FirstRank
	if n < 1 || len(argv) == 0 {
		fmt.Fprintln(stderr, "gpuportal run-tasks: want --tasks N (N >= 1) and a command after --")
		return 2
	}
	type ended struct {
		task int
		code int
	}
	done := make(chan ended, n)
	cmds := make([]*exec.Cmd, 0, n)
	for i := range n {
		cmd := exec.Command(argv[0], argv[1:]...)
		r, l := strconv.Itoa(firstRank+i), strconv.Itoa(t.FirstLocal+i)
		cmd.Env = append(append(os.Environ(), t.Env...), "RANK="+r, "LOCAL_RANK="+l, "SLURM_PROCID="+r, "SLURM_LOCALID="+l)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(stderr, "gpuportal run-tasks: task %d: %v\n", i, err)
			signalAll(cmds, syscall.SIGKILL)
			for range cmds {
				<-done
			}
			return 127
		}
		cmds = append(cmds, cmd)
		go func(i int, cmd *exec.Cmd) { done <- ended{i, exitCodeOf(cmd.Wait())} }(i, cmd)
	}
	code, left := 0, n
	var kill <-chan time.Time
	stop := func() {
		signalAll(cmds, syscall.SIGTERM)
		if kill == nil {
			kill = time.After(grace)
		}
	}
	ctxDone := ctx.Done()
	for left > 0 {
		select {
		case e := <-done:
			left--
			if e.code != 0 && code == 0 {
				code = e.code
				fmt.Fprintf(stderr, "gpuportal run-tasks: task %d (rank %d) ended with code %d: stopping the others\n", e.task, firstRank+e.task, e.code)
				stop()
			}
		case <-ctxDone:
			ctxDone = nil
			stop()
		case <-kill:
			signalAll(cmds, syscall.SIGKILL)
		}
	}
	if code == 0 && ctx.Err() != nil {
		code = 128 + int(syscall.SIGTERM)
	}
	return code
}

func signalAll(cmds []*exec.Cmd, sig syscall.Signal) {
	for _, c := range cmds {
		_ = c.Process.Signal(sig) // one that has exited says so, and is left alone
	}
}

// exitCodeOf is a process's exit code, 128+signal for one killed.
func exitCodeOf(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 127
}
