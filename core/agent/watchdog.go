package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The watchdog fences jobs when their agent cannot: a small process of its
// own (gpuportal agent-watchdog) that the agent starts and feeds, over a
// pipe, the process group of every command job and a lease: the time until
// which the agent may let its jobs run, renewed whenever it hears a
// server. When the lease runs out (the agent is frozen, or cut off from
// every server) or the pipe closes (the agent died), the watchdog sends
// each job's process group SIGTERM and, after the job's grace period,
// SIGKILL. A frozen or killed agent therefore never leaves a job running
// that the server has started elsewhere (docs/agents.md, "A job runs
// once").
//
// The protocol is one command a line:
//
//	lease UNIXNANO     jobs may run until then (0: no lease yet)
//	add PGID GRACEMS   a job's process group and its grace period
//	del PGID           the job's group is gone

// WatchdogLink is the agent's end of the pipe to its watchdog. Its methods
// never block the agent for long: a write that fails is logged once and
// the agent goes on (it fences itself too, see fence.go).
type WatchdogLink struct {
	mu     sync.Mutex
	w      io.WriteCloser
	cmd    *exec.Cmd
	log    *slog.Logger
	broken bool
	lease  time.Time // last lease sent
}

// StartWatchdog starts exe (this program) as "exe agent-watchdog" in its
// own process group, so that a signal to the agent's group does not reach
// it, and returns the agent's end of the pipe.
func StartWatchdog(exe string, log *slog.Logger) (*WatchdogLink, error) {
	cmd := exec.Command(exe, "agent-watchdog")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("watchdog: start %s: %w", exe, err)
	}
	return &WatchdogLink{w: w, cmd: cmd, log: log}, nil
}

// NewWatchdogLink returns a link that writes to w, for tests.
func NewWatchdogLink(w io.WriteCloser, log *slog.Logger) *WatchdogLink {
	return &WatchdogLink{w: w, log: log}
}

func (l *WatchdogLink) send(format string, args ...any) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken {
		return
	}
	if _, err := fmt.Fprintf(l.w, format+"\n", args...); err != nil {
		l.broken = true
		l.log.Error("the job watchdog is gone: jobs are fenced by the agent alone", "err", err)
	}
}

// Lease lets the jobs run until deadline. Leases closer than a fifth of a
// second to the last one sent are not sent again.
func (l *WatchdogLink) Lease(deadline time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	skip := deadline.Sub(l.lease) < 200*time.Millisecond && deadline.After(l.lease)
	if !skip {
		l.lease = deadline
	}
	l.mu.Unlock()
	if !skip {
		l.send("lease %d", deadline.UnixNano())
	}
}

// Deadline is the lease last sent: when the watchdog stops the jobs
// unless renewed. Zero without a watchdog or before the first lease.
func (l *WatchdogLink) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease
}

// Add tells the watchdog of a job's process group.
func (l *WatchdogLink) Add(pgid int, grace time.Duration) {
	l.send("add %d %d", pgid, grace.Milliseconds())
}

// Remove tells the watchdog that a job's process group is gone.
func (l *WatchdogLink) Remove(pgid int) { l.send("del %d", pgid) }

// Close closes the pipe: the watchdog stops the groups it still knows (an
// agent that shut down cleanly has stopped them all) and exits.
func (l *WatchdogLink) Close() error {
	if l == nil {
		return nil
	}
	err := l.w.Close()
	if l.cmd != nil {
		err = errors.Join(err, l.cmd.Wait())
	}
	return err
}

// watchdog is the watchdog process's state.
type watchdog struct {
	log      *slog.Logger
	kill     func(pgid int, sig syscall.Signal) error
	groups   map[int]time.Duration // process group -> grace period
	deadline time.Time             // zero: no lease yet
	fenced   bool                  // the groups were sent SIGTERM for this lease
}

// RunWatchdog is the watchdog process: it reads commands from r until it
// closes or ctx ends, and fences the job groups it knows when the lease
// runs out or r closes.
func RunWatchdog(ctx context.Context, r io.Reader, log *slog.Logger) error {
	w := &watchdog{log: log, groups: make(map[int]time.Duration), kill: func(pgid int, sig syscall.Signal) error {
		return syscall.Kill(-pgid, sig)
	}}
	lines := make(chan string)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		done <- sc.Err()
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line := <-lines:
			if err := w.apply(line); err != nil {
				log.Warn("watchdog: ignoring a command", "line", line, "err", err)
			}
		case err := <-done:
			// The agent is gone: no job may outlive it.
			w.fence(time.Now(), "the agent is gone")
			w.waitAndKill(ctx)
			return err
		case now := <-tick.C:
			if !w.deadline.IsZero() && now.After(w.deadline) && !w.fenced {
				w.fence(now, "the agent's lease ran out: it is frozen or no server has heard it")
				go w.killLater(ctx, w.snapshot())
			}
		}
	}
}

func (w *watchdog) apply(line string) error {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil
	}
	nums := make([]int64, len(f)-1)
	for i, s := range f[1:] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		nums[i] = n
	}
	switch {
	case f[0] == "lease" && len(nums) == 1:
		d := time.Unix(0, nums[0])
		if d.After(w.deadline) {
			w.deadline, w.fenced = d, false
		}
	case f[0] == "add" && len(nums) == 2 && nums[0] > 1:
		w.groups[int(nums[0])] = time.Duration(nums[1]) * time.Millisecond
	case f[0] == "del" && len(nums) == 1:
		delete(w.groups, int(nums[0]))
	default:
		return errors.New("unknown command")
	}
	return nil
}

// fence sends every known group SIGTERM.
func (w *watchdog) fence(now time.Time, why string) {
	w.fenced = true
	for pgid := range w.groups {
		w.log.Warn("watchdog: stopping a job", "pgid", pgid, "why", why, "lease_ended", w.deadline.Format(time.RFC3339Nano))
		_ = w.kill(pgid, syscall.SIGTERM)
	}
}

func (w *watchdog) snapshot() map[int]time.Duration {
	out := make(map[int]time.Duration, len(w.groups))
	for k, v := range w.groups {
		out[k] = v
	}
	return out
}

// killLater sends SIGKILL to groups once their grace periods are over.
func (w *watchdog) killLater(ctx context.Context, groups map[int]time.Duration) {
	start := time.Now()
	for pgid, grace := range groups {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(grace))):
		}
		_ = w.kill(pgid, syscall.SIGKILL)
	}
}

func (w *watchdog) waitAndKill(ctx context.Context) { w.killLater(ctx, w.snapshot()) }
