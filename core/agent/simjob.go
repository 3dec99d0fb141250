package agent

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// simLogEvery is how often a simulated job writes a progress line.
const simLogEvery = 5 * time.Second

// startSim runs a simulated job: it holds its GPUs for SimRemaining and
// writes progress lines as a training script would.
func (a *Local) startSim(s job.Spec, log *os.File) (wait func() (int, string), stop func()) {
	stopped := make(chan struct{})
	var once sync.Once
	stop = func() { once.Do(func() { close(stopped) }) }
	if s.Sharing != nil && a.gate != nil {
		return func() (int, string) { return a.sharedSim(s, log, stopped) }, stop
	}
	wait = func() (int, string) {
		start := time.Now()
		fmt.Fprintf(log, "%s simulated job %d started on GPUs %v, %s to go\n",
			start.Format(time.RFC3339), s.JobID, s.GPUs, s.SimRemaining.Round(time.Second))
		done := time.NewTimer(s.SimRemaining)
		defer done.Stop()
		tick := time.NewTicker(simLogEvery)
		defer tick.Stop()
		for step := 1; ; step++ {
			select {
			case <-done.C:
				fmt.Fprintf(log, "%s done\n", time.Now().Format(time.RFC3339))
				return 0, ""
			case <-stopped:
				return a.simStopped(log)
			case now := <-tick.C:
				fmt.Fprintf(log, "%s step %d, %s elapsed\n", now.Format(time.RFC3339), step, now.Sub(start).Round(time.Second))
			}
		}
	}
	return wait, stop
}

// simStopped ends a simulated job that was asked to stop: it saves its
// checkpoint for Config.SimCheckpoint and exits, or is killed once the
// grace period is over, as a real job on SIGTERM then SIGKILL.
func (a *Local) simStopped(log *os.File) (int, string) {
	d := a.cfg.SimCheckpoint
	if d <= 0 {
		fmt.Fprintf(log, "%s stopped (SIGTERM)\n", time.Now().Format(time.RFC3339))
		return -1, job.KilledBy(syscall.SIGTERM)
	}
	fmt.Fprintf(log, "%s SIGTERM: saving a checkpoint (%s)\n", time.Now().Format(time.RFC3339), d)
	if d >= a.cfg.Grace {
		time.Sleep(a.cfg.Grace)
		fmt.Fprintf(log, "%s killed (SIGKILL): the checkpoint took longer than the grace period, %s\n", time.Now().Format(time.RFC3339), a.cfg.Grace)
		return -1, job.KilledBy(syscall.SIGKILL)
	}
	time.Sleep(d)
	fmt.Fprintf(log, "%s checkpoint saved; stopped (SIGTERM)\n", time.Now().Format(time.RFC3339))
	return -1, job.KilledBy(syscall.SIGTERM)
}
